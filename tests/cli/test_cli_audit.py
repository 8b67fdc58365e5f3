"""The command line's changes leave events in the tenant's audit trail (docs/audit.md, "The
command line"): written by the command's own audit writer, in chains `audit verify` checks,
shown by `audit export` and by GET /logs to the tenant's auditor, never holding a key."""

from __future__ import annotations

import re
import socket
import uuid
from datetime import UTC, datetime

import orjson

from vaultgraph.audit.command import os_user

from .conftest import main_in_process, new_tenant

TRACE = re.compile(r"[0-9a-f]{32}")


def exported(cli, since: str, tenant_id: str) -> list[dict]:
    """The tenant's events since `since`, as `audit export` writes them, oldest first."""
    result = cli("audit", "export", "--since", since)
    assert result.status == 0, result.stderr
    return [e for e in result.lines() if e.get("tenant_id") == tenant_id]


def verified(cli, events: list[dict]) -> None:
    """`audit verify` passes over the chains the events are in (other tests' chains may hold
    their own tampering)."""
    chains = sorted({e["chain"] for e in events})
    assert chains and all(chains)
    result = cli("audit", "verify", *(a for c in chains for a in ("--chain", c)))
    assert (result.status, result.stdout) == (0, ""), result.stderr
    assert result.stderr.splitlines()[-1].endswith(" checked, 0 finding(s)")


def from_the_command_line(event: dict, route: str) -> None:
    """What every event of a command holds: its route, no caller's address, the user who ran
    it, the run's trace id."""
    assert event["route"] == f"CLI {route}"
    assert event.get("client_ip") is None  # the export leaves out what is null
    # The OS user, with no host and no version: the tenant's auditor reads it.
    assert event["user_agent"] == f"vaultgraph command line; user {os_user()}"
    assert socket.gethostname() not in event["user_agent"]
    assert TRACE.fullmatch(event["trace_id"])
    assert not event.get("token_ids") and event.get("transform") is None


def no_key_in(text: str, *keys: str) -> None:
    assert "vg_" not in text
    for key in keys:
        assert key not in text


async def test_tenants_create_leaves_its_event_in_the_new_tenant_s_trail(cli, client):
    since = datetime.now(UTC).isoformat()
    tenant = new_tenant(cli)
    [key] = cli("applications", "show", "--tenant", tenant["tenant_id"],
                tenant["application_id"]).json()["keys"]

    [event] = exported(cli, since, tenant["tenant_id"])
    from_the_command_line(event, "tenants create")
    assert (event["operation"], event["outcome"], event["status"], event.get("reason")) == (
        "application:create", "success", 201, None)
    assert (event.get("application_id"), event.get("key_id")) == (
        tenant["application_id"], key["id"])
    no_key_in(orjson.dumps(event).decode(), tenant["key"])
    verified(cli, [event])

    # The tenant's auditor reads it (its administrator holds log:read).
    resp = await client.get("/logs", params={"operation": "application:create"},
                            headers={"SVC-API-KEY": tenant["key"]})
    assert resp.status == 200, await resp.text()
    [logged] = (await resp.json())["data"]
    assert logged["id"] == event["id"] and logged["route"] == "CLI tenants create"
    assert logged["application_id"] == tenant["application_id"]


def test_application_create_rotate_and_revoke_leave_their_events(cli):
    tenant = new_tenant(cli)
    tenant_id = tenant["tenant_id"]
    since = datetime.now(UTC).isoformat()
    created = cli("applications", "create", "--tenant", tenant_id, "--name", "shop",
                  "--permission", "token:read")
    assert created.status == 0, created.stderr
    app = created.json()
    app_id = app["application_id"]
    [first] = cli("applications", "show", "--tenant", tenant_id, app_id).json()["keys"]
    rotated = cli("applications", "rotate-key", "--tenant", tenant_id, app_id)
    assert rotated.status == 0, rotated.stderr
    new = rotated.json()
    kept = cli("applications", "rotate-key", "--tenant", tenant_id, app_id, "--keep-old").json()
    # Ids in another spelling the service reads (upper case, braces): the event names them
    # as the service does, where it used to leave them out.
    revoked = cli("applications", "revoke-key", "--tenant", tenant_id, app_id.upper(),
                  "{" + new["key_id"].upper() + "}")
    assert revoked.status == 0, revoked.stderr

    events = exported(cli, since, tenant_id)
    assert [(e["route"], e["operation"], e["status"], e.get("key_id"), e.get("reason"))
            for e in events] == [
        ("CLI applications create", "application:create", 201, first["id"], None),
        ("CLI applications rotate-key", "application:update", 201, new["key_id"], None),
        ("CLI applications rotate-key", "application:update", 204, first["id"], "rotated"),
        ("CLI applications rotate-key", "application:update", 201, kept["key_id"], None),
        ("CLI applications revoke-key", "application:update", 204, new["key_id"], None)]
    for event, route in zip(events, ("applications create", *["applications rotate-key"] * 3,
                                     "applications revoke-key"), strict=True):
        from_the_command_line(event, route)
        assert (event["tenant_id"], event.get("application_id"), event["outcome"]) == (
            tenant_id, app_id, "success")
    # One run, one trace id: rotate-key's new key and the revocation it made go together.
    assert events[1]["trace_id"] == events[2]["trace_id"] != events[3]["trace_id"]
    no_key_in(orjson.dumps(events).decode(), app["key"], new["key"], kept["key"])
    verified(cli, events)


def test_read_only_commands_leave_no_event(cli):
    tenant = new_tenant(cli)
    tenant_id, app_id = tenant["tenant_id"], tenant["application_id"]
    since = datetime.now(UTC).isoformat()
    for args in (("tenants", "list"), ("tenants", "show", tenant_id),
                 ("applications", "list", "--tenant", tenant_id),
                 ("applications", "show", "--tenant", tenant_id, app_id),
                 ("keys", "status"), ("audit", "verify", "--chain", "1")):
        cli(*args)
    assert exported(cli, since, tenant_id) == []


def test_a_change_refused_by_its_write_leaves_its_event_and_the_chain_verifies(cli):
    """A revoke of a key the application does not have, and a create in a tenant that does
    not exist: each write sent its event (the create's statement committed it, matching no
    tenant), which is linked as the command ended, so no event is left out of a chain."""
    tenant = new_tenant(cli)
    tenant_id, app_id = tenant["tenant_id"], tenant["application_id"]
    since = datetime.now(UTC).isoformat()
    unknown = "00000000-0000-4000-8000-000000000000"
    missing = cli("applications", "revoke-key", "--tenant", tenant_id, app_id, unknown)
    assert missing.status == 1, missing.stderr
    nowhere = str(uuid.uuid4())
    no_tenant = cli("applications", "create", "--tenant", nowhere, "--name", "x")
    assert no_tenant.status == 1, no_tenant.stderr

    [refused] = exported(cli, since, tenant_id)
    from_the_command_line(refused, "applications revoke-key")
    assert (refused["outcome"], refused["status"], refused.get("key_id")) == (
        "not_found", 404, unknown)
    [orphan] = exported(cli, since, nowhere)
    assert (orphan["route"], orphan["outcome"], orphan["status"]) == (
        "CLI applications create", "not_found", 404)
    verified(cli, [refused, orphan])


def test_what_an_operator_types_in_place_of_an_id_never_reaches_the_trail(cli):
    """An API key pasted as --tenant names no tenant: the create is refused, and its event
    (its statement committed it, matching no tenant) names no tenant rather than the text."""
    tenant = new_tenant(cli)
    since = datetime.now(UTC).isoformat()
    pasted = cli("applications", "create", "--tenant", tenant["key"], "--name", "x")
    assert (pasted.status, pasted.stderr) == (
        1, "vaultgraph: No tenant with this id: check the ids (vaultgraph tenants list, "
           "vaultgraph applications list --tenant ID)\n")
    everything = cli("audit", "export", "--since", since)
    assert everything.status == 0, everything.stderr
    no_key_in(everything.stdout, tenant["key"])
    [event] = [e for e in everything.lines() if e.get("route") == "CLI applications create"]
    assert event.get("tenant_id") is None
    assert (event["outcome"], event["status"]) == ("not_found", 404)
    verified(cli, [event])


def test_keys_rotate_leaves_one_event_per_tenant_re_wrapped(cli):
    first, second = new_tenant(cli, "first"), new_tenant(cli, "second")
    since = datetime.now(UTC).isoformat()
    result = cli("keys", "rotate", "--tenant", first["tenant_id"])
    assert result.status == 0, result.stderr
    [event] = exported(cli, since, first["tenant_id"])
    from_the_command_line(event, "keys rotate")
    assert (event["operation"], event["status"], event["outcome"]) == (
        "kek:rotate", 200, "success")
    assert (event.get("application_id"), event.get("key_id")) == (None, None)
    assert exported(cli, since, second["tenant_id"]) == []
    verified(cli, [event])

    again = cli("keys", "rotate", "--tenant", first["tenant_id"], "--tenant",
                second["tenant_id"])  # resumes: only the second is re-wrapped
    assert again.status == 0, again.stderr
    assert [e["id"] for e in exported(cli, since, first["tenant_id"])] == [event["id"]]
    [other] = exported(cli, since, second["tenant_id"])
    assert other["operation"] == "kek:rotate"
    verified(cli, [event, other])


def rotating(cli, n: int) -> tuple[list[str], list[str], str]:
    """`n` new tenants' ids in the order a rotation takes them (by id), `--tenant` for each,
    and the time before they were made."""
    since = datetime.now(UTC).isoformat()
    ids = sorted(new_tenant(cli, f"rotated {i}")["tenant_id"] for i in range(n))
    return ids, [arg for tenant_id in ids for arg in ("--tenant", tenant_id)], since


def kek_events(cli, since: str, tenant_id: str) -> list[dict]:
    return [e for e in exported(cli, since, tenant_id) if e["operation"] == "kek:rotate"]


def lost_after_the_first_tenant(monkeypatch) -> list[int]:
    """Neo4j "lost" once a rotation reports its first tenant done: every statement after that
    raises `Unavailable`. The list the rotation's progress reports are kept in."""
    from vaultgraph.cli.common import Progress
    from vaultgraph.errors import Unavailable
    from vaultgraph.repository.database import Database

    statement, lost = Database._statement, []

    async def statement_unless_lost(self, *args, **kwargs):
        if lost:
            raise Unavailable()
        return await statement(self, *args, **kwargs)

    monkeypatch.setattr(Database, "_statement", statement_unless_lost)
    monkeypatch.setattr(Progress, "__call__", lambda self, done, total=None: lost.append(done))
    return lost


def test_a_rotation_stopped_half_way_leaves_the_events_of_the_tenants_re_wrapped(
        cli, monkeypatch):
    """Neo4j is lost once the first of three tenants is re-wrapped: the run fails, and that
    tenant's event is in its trail, linked, since each tenant's event is written with its
    re-wrap (not after the run's last one); the two not re-wrapped have none. The next run
    re-wraps them, each with its event, and none for the first again."""
    ids, only, since = rotating(cli, 3)
    lost = lost_after_the_first_tenant(monkeypatch)
    stopped = main_in_process(cli, monkeypatch, "keys", "rotate", *only)
    assert (stopped.status, lost) == (1, [1]), stopped.stderr
    monkeypatch.undo()

    [first] = kek_events(cli, since, ids[0])
    from_the_command_line(first, "keys rotate")
    assert (first["status"], first["outcome"]) == (200, "success")
    assert [kek_events(cli, since, tenant_id) for tenant_id in ids[1:]] == [[], []]
    verified(cli, [first])

    resumed = cli("keys", "rotate", *only)
    assert resumed.status == 0, resumed.stderr
    assert resumed.json()["rewrapped"] == 2
    events = [kek_events(cli, since, tenant_id) for tenant_id in ids]
    assert [len(e) for e in events] == [1, 1, 1] and events[0] == [first]
    verified(cli, [e for each in events for e in each])


def test_a_rotation_interrupted_during_a_re_wrap_finishes_that_tenant_s_event(
        cli, monkeypatch):
    """Ctrl-C while the second tenant's re-wrap is being written: that re-wrap and its event
    end as a run's do (its write may commit the event), so both tenants re-wrapped have their
    event, linked, and the third none; the command ends as interrupted."""
    import signal

    from vaultgraph.repository.database import Database

    ids, only, since = rotating(cli, 3)
    statement, writes = Database._statement, []

    async def interrupted_at_the_second(self, name, *args, **kwargs):
        if name == "tenants/replace_key_material":
            writes.append(name)
            if len(writes) == 2:
                signal.raise_signal(signal.SIGINT)
        return await statement(self, name, *args, **kwargs)

    monkeypatch.setattr(Database, "_statement", interrupted_at_the_second)
    stopped = main_in_process(cli, monkeypatch, "keys", "rotate", *only)
    assert (stopped.status, len(writes)) == (130, 2), stopped.stderr
    monkeypatch.undo()

    events = [kek_events(cli, since, tenant_id) for tenant_id in ids]
    assert [len(e) for e in events] == [1, 1, 0]
    verified(cli, [e for each in events for e in each])


def test_a_re_wrap_that_finds_the_keys_changed_leaves_a_conflict_and_tries_again(
        cli, monkeypatch):
    """The first compare-and-set meets other keys than it read (as after a concurrent data key
    rotation): its statement committed its event, linked as a conflict; the tenant is read and
    re-wrapped again, under an event of its own."""
    from vaultgraph.repository.tenants import TenantRepository

    [tenant_id], only, since = rotating(cli, 1)
    replace, tries = TenantRepository.replace_key_material, []

    async def changed_at_first(self, tenant_id, old, new):
        tries.append(tenant_id)
        if len(tries) == 1:
            old = {**old, "dek_version": "changed meanwhile"}
        return await replace(self, tenant_id, old, new)

    monkeypatch.setattr(TenantRepository, "replace_key_material", changed_at_first)
    result = main_in_process(cli, monkeypatch, "keys", "rotate", *only)
    assert (result.status, len(tries)) == (0, 2), result.stderr
    assert result.json()["rewrapped"] == 1
    monkeypatch.undo()

    events = kek_events(cli, since, tenant_id)
    assert [(e["status"], e["outcome"]) for e in events] == [(409, "conflict"), (200, "success")]
    for event in events:
        from_the_command_line(event, "keys rotate")
    assert events[0]["trace_id"] == events[1]["trace_id"]
    verified(cli, events)


def test_a_change_whose_event_cannot_be_linked_prints_its_key_and_fails(
        cli, tmp_path, monkeypatch, settings):
    """The create commits with its event (pending); the batch that links it fails: the key is
    still delivered (the application exists), and the command says so and exits 1."""
    from vaultgraph.errors import Unavailable
    from vaultgraph.repository.audit import AuditRepository

    tenant = new_tenant(cli)

    async def batch_fails(self, *args, **kwargs):
        raise Unavailable()

    monkeypatch.setattr(AuditRepository, "write_batch", batch_fails)
    path = tmp_path / "new.key"
    result = main_in_process(cli, monkeypatch, "applications", "create", "--tenant",
                             tenant["tenant_id"], "--name", "shop", "--key-file", str(path))
    assert result.status == 1
    printed = result.json()
    assert printed == {"application_id": printed["application_id"], "key_file": str(path)}
    assert path.read_text().startswith("vg_")
    message = result.stderr
    event_id = re.search(r"audit event (\S+) stored", message).group(1)
    assert message == (
        f"vaultgraph: the change was made and its audit event {event_id} stored with it, but "
        "the event could not be linked into its chain (vaultgraph audit verify names it "
        "unlinked): the change stands (what it printed is valid): do not run the command "
        "again; check that Neo4j is reachable\n")
    monkeypatch.undo()
    assert taken_pending(settings, "{id: $id}", id=event_id) == ["CLI applications create"]


def test_a_rotation_whose_events_cannot_be_linked_re_wraps_and_says_so(
        cli, monkeypatch, settings):
    """Each re-wrap commits with its event (pending); the batches that would link them fail:
    the re-wraps stand, the summary is printed, and one line counts the events left unlinked,
    exit 1."""
    from vaultgraph.errors import Unavailable
    from vaultgraph.repository.audit import AuditRepository

    _, only, _ = rotating(cli, 2)

    async def batch_fails(self, *args, **kwargs):
        raise Unavailable()

    monkeypatch.setattr(AuditRepository, "write_batch", batch_fails)
    result = main_in_process(cli, monkeypatch, "keys", "rotate", *only)
    assert result.status == 1
    assert result.json()["rewrapped"] == 2
    assert result.stderr.endswith(
        "\nvaultgraph: 2 tenant(s) were re-wrapped and their audit events stored with the "
        "re-wraps, but the events could not be linked into their chains (vaultgraph audit "
        "verify names them unlinked): the re-wraps stand (they change no access): do not run "
        "the command again for them; check that Neo4j is reachable\n")
    monkeypatch.undo()
    assert taken_pending(settings, "{route: 'CLI keys rotate'}") == ["CLI keys rotate"] * 2


def test_a_rotation_stopped_after_events_left_unlinked_still_counts_them(
        cli, monkeypatch, settings):
    """The first tenant's event cannot be linked, then Neo4j is lost: the run fails with the
    loss, and a line before it counts the event left unlinked."""
    from vaultgraph.errors import Unavailable
    from vaultgraph.repository.audit import AuditRepository

    _, only, _ = rotating(cli, 3)

    async def batch_fails(self, *args, **kwargs):
        raise Unavailable()

    monkeypatch.setattr(AuditRepository, "write_batch", batch_fails)
    lost = lost_after_the_first_tenant(monkeypatch)
    stopped = main_in_process(cli, monkeypatch, "keys", "rotate", *only)
    assert (stopped.status, lost) == (1, [1]), stopped.stderr
    assert ("vaultgraph: 1 tenant(s) were re-wrapped and their audit events stored with the "
            "re-wraps, but the events could not be linked into their chains (vaultgraph audit "
            "verify names them unlinked)\n") in stopped.stderr
    monkeypatch.undo()
    assert taken_pending(settings, "{route: 'CLI keys rotate'}") == ["CLI keys rotate"]


def taken_pending(settings, where: str, **params) -> list[str]:
    """The routes of the pending events `where` (a node pattern's map) picks, deleted: stored
    by a change whose event was not linked, taken away so that no later `audit verify` of the
    whole database names them."""
    import neo4j

    with neo4j.GraphDatabase.driver(settings.neo4j_uri, auth=(
            settings.neo4j_user, settings.resolved_neo4j_password())) as driver:
        records, _, _ = driver.execute_query(
            f"MATCH (e:PendingAuditEvent {where}) WITH e, e.route AS route DELETE e "
            "RETURN route", database_=settings.neo4j_database, **params)
    return [r["route"] for r in records]
