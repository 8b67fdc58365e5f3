"""Each command, driven as an operator would (subprocess), its effect read back from Neo4j or
through the HTTP API of an app built on the same key file."""

from __future__ import annotations

import dataclasses
import io
import os
import re
import stat
import uuid
from contextlib import redirect_stderr
from datetime import UTC, datetime

import orjson
import pytest
from factories import PRIVATE_PASSWORD, private_neo4j, retime_chain

from vaultgraph.api.typedefs import services_key
from vaultgraph.audit.chain import sign
from vaultgraph.cli.common import run_async, services
from vaultgraph.cli.serve import bootstrap
from vaultgraph.crypto import KeyRing
from vaultgraph.repository.audit import event_of

from .conftest import main_in_process, new_tenant

UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


@pytest.fixture
def settings(settings):
    """No auth cache: each request reads the tenant's stored keys again (KEK rotation)."""
    return dataclasses.replace(settings, auth_cache_ttl=0.0)


async def status_of(client, key: str, path: str = "/applications/self") -> int:
    resp = await client.get(path, headers={"SVC-API-KEY": key})
    return resp.status


def test_tenants_create_list_show(cli):
    created = new_tenant(cli, "acme")
    assert set(created) == {"tenant_id", "application_id", "key"}
    assert UUID.fullmatch(created["tenant_id"]) and created["key"].startswith("vg_")

    shown = cli("tenants", "show", created["tenant_id"])
    assert shown.status == 0, shown.stderr
    body = shown.json()
    assert body == {"id": created["tenant_id"], "name": "acme", "created_at": body["created_at"],
                    "applications": 1, "dek_version": "d1", "kek_versions": ["k1"]}
    assert datetime.fromisoformat(body["created_at"]).tzinfo is not None

    listed = cli("tenants", "list")
    assert listed.status == 0, listed.stderr
    rows = listed.lines()
    assert [r for r in rows if r["id"] == created["tenant_id"]] == [body]
    assert [r["id"] for r in rows] == sorted(r["id"] for r in rows)

    missing = cli("tenants", "show", "00000000-0000-4000-8000-000000000000")
    assert (missing.status, missing.stdout, missing.stderr) == (
        1, "", "vaultgraph: No tenant with this id: check the ids (vaultgraph tenants list, "
               "vaultgraph applications list --tenant ID)\n")


@pytest.mark.parametrize(("name", "message"), [
    ("", ["Length must be between 1 and 186.", "must not be blank"]),
    ("   ", ["must not be blank"]),
    ("a\x01b", ["must hold printable characters only"]),
    ("line\nbreak", ["must hold printable characters only"]),
    ("x" * 187, ["Length must be between 1 and 186."]),
    ("x" * 5000, ["Length must be between 1 and 186."])])
def test_a_tenant_name_its_administrators_name_cannot_follow_is_a_usage_error(
        cli, tmp_path, name, message):
    # The administrator application is named "<name> administrator", under the rule of every
    # application's name (1 to 200 characters, not blank).
    before = cli("tenants", "list").lines()
    key_file = tmp_path / "admin.key"
    result = cli("tenants", "create", "--name", name, "--key-file", str(key_file))
    assert (result.status, result.stdout) == (2, "")
    assert result.stderr == (f"vaultgraph: invalid input {orjson.dumps({'name': message}).decode()}"
                             ": see --help for the expected values\n")
    assert cli("tenants", "list").lines() == before and not key_file.exists()


def test_a_tenant_name_may_hold_the_spaces_of_any_script(cli):
    for name in ("ACME\u00a0GmbH", "株式会社\u3000テスト"):
        tenant = new_tenant(cli, name)
        [admin] = cli("applications", "list", "--tenant", tenant["tenant_id"]).lines()
        assert admin["name"] == f"{name} administrator"


def test_the_longest_tenant_name_gives_a_200_character_administrator_name(cli):
    tenant = new_tenant(cli, "é" * 186)
    [admin] = cli("applications", "list", "--tenant", tenant["tenant_id"]).lines()
    assert admin["name"] == "é" * 186 + " administrator" and len(admin["name"]) == 200


def test_key_file_is_0600_and_key_not_on_stdout(cli, tmp_path):
    path = tmp_path / "acme.key"
    name = f"filed-{uuid.uuid4().hex[:8]}"
    result = cli("tenants", "create", "--name", name, "--key-file", str(path))
    assert result.status == 0, result.stderr
    body = result.json()
    assert set(body) == {"tenant_id", "application_id", "key_file"}
    assert body["key_file"] == str(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert path.read_text().startswith("vg_") and path.read_text().strip() not in result.stdout
    again = cli("tenants", "create", "--name", name, "--key-file", str(path))
    assert (again.status, again.stderr) == (
        1, f"vaultgraph: {path} exists: name a new file for --key-file (it is never "
           "overwritten)\n")
    # Refused before anything was created: no second tenant with an admin key nobody holds.
    assert [r["id"] for r in cli("tenants", "list").lines() if r["name"] == name] == [
        body["tenant_id"]]


def test_a_key_file_that_cannot_be_created_is_refused_before_anything_changes(cli, tmp_path):
    tenant = new_tenant(cli)
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    path = blocker / "app.key"
    created = cli("applications", "create", "--tenant", tenant["tenant_id"], "--name", "late",
                  "--key-file", str(path))
    assert (created.status, created.stdout, created.stderr) == (
        1, "", f"vaultgraph: cannot create the directory {blocker} (File exists): name a new "
               "file in a writable directory for --key-file\n")
    taken = tmp_path / "taken.key"
    taken.write_text("someone's key\n")
    again = cli("applications", "create", "--tenant", tenant["tenant_id"], "--name", "late",
                "--key-file", str(taken))
    assert (again.status, again.stdout) == (1, "")
    assert taken.read_text() == "someone's key\n"
    listed = cli("applications", "list", "--tenant", tenant["tenant_id"]).lines()
    assert [r["id"] for r in listed] == [tenant["application_id"]]


async def test_rotate_key_to_an_existing_file_keeps_the_old_key(cli, client, tmp_path):
    tenant = new_tenant(cli)
    taken = tmp_path / "taken.key"
    taken.write_text("")
    result = cli("applications", "rotate-key", "--tenant", tenant["tenant_id"],
                 tenant["application_id"], "--key-file", str(taken))
    assert (result.status, result.stderr) == (
        1, f"vaultgraph: {taken} exists: name a new file for --key-file (it is never "
           "overwritten)\n")
    assert await status_of(client, tenant["key"]) == 200
    keys = cli("applications", "show", "--tenant", tenant["tenant_id"],
               tenant["application_id"]).json()["keys"]
    assert len(keys) == 1
    assert taken.read_text() == ""


def test_rotate_key_writes_the_new_key_before_revoking_the_old(cli, tmp_path, monkeypatch):
    """A revoke that fails (Neo4j gone half-way) leaves the new key in the file and printed:
    the application still has a key someone holds."""
    from vaultgraph.errors import Unavailable
    from vaultgraph.services.applications import ApplicationService

    tenant = new_tenant(cli)
    app = cli("applications", "create", "--tenant", tenant["tenant_id"], "--name", "rot",
              "--permission", "token:read").json()

    async def revoke_fails(self, caller, application_id, key_id):
        raise Unavailable()

    monkeypatch.setattr(ApplicationService, "revoke_key", revoke_fails)
    path = tmp_path / "new.key"
    result = main_in_process(cli, monkeypatch, "applications", "rotate-key", "--tenant",
                             tenant["tenant_id"], app["application_id"], "--key-file", str(path))
    assert result.status == 1
    assert result.stderr.startswith("vaultgraph: cannot reach Neo4j at ")
    printed = result.json()
    assert printed == {"application_id": app["application_id"], "key_id": printed["key_id"],
                       "revoked": [], "key_file": str(path)}
    assert path.read_text().startswith("vg_") and path.read_text().strip() != app["key"]
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    keys = cli("applications", "show", "--tenant", tenant["tenant_id"],
               app["application_id"]).json()["keys"]
    assert printed["key_id"] in [k["id"] for k in keys] and len(keys) == 2


async def test_applications_lifecycle(cli, client):
    tenant = new_tenant(cli)
    rule = '{"container": "/pci/", "transform": "mask", "permissions": ["token:read"]}'
    created = cli("applications", "create", "--tenant", tenant["tenant_id"], "--name", "shop",
                  "--permission", "token:read", "--rule", rule)
    assert created.status == 0, created.stderr
    app = created.json()
    assert set(app) == {"application_id", "key"}
    assert await status_of(client, app["key"]) == 200

    shown = cli("applications", "show", "--tenant", tenant["tenant_id"], app["application_id"])
    assert shown.status == 0, shown.stderr
    body = shown.json()
    assert (body["id"], body["name"], body["permissions"], body["created_by"]) == (
        app["application_id"], "shop", ["token:read"], None)
    assert [r["container"] for r in body["rules"]] == ["/pci/"]
    [first_key] = body["keys"]
    assert "key" not in first_key and "hash" not in first_key

    listed = cli("applications", "list", "--tenant", tenant["tenant_id"])
    assert listed.status == 0, listed.stderr
    assert [r["id"] for r in listed.lines()] == [tenant["application_id"], app["application_id"]]

    rotated = cli("applications", "rotate-key", "--tenant", tenant["tenant_id"],
                  app["application_id"])
    assert rotated.status == 0, rotated.stderr
    new = rotated.json()
    assert new["revoked"] == [first_key["id"]] and new["key"] != app["key"]
    assert await status_of(client, app["key"]) == 401
    assert await status_of(client, new["key"]) == 200

    kept = cli("applications", "rotate-key", "--tenant", tenant["tenant_id"],
               app["application_id"], "--keep-old")
    assert kept.status == 0 and kept.json()["revoked"] == []
    assert await status_of(client, new["key"]) == 200

    revoked = cli("applications", "revoke-key", "--tenant", tenant["tenant_id"],
                  app["application_id"], new["key_id"])
    assert (revoked.status, revoked.json()) == (
        0, {"application_id": app["application_id"], "revoked": [new["key_id"]]})
    assert await status_of(client, new["key"]) == 401
    assert await status_of(client, kept.json()["key"]) == 200
    keys = cli("applications", "show", "--tenant", tenant["tenant_id"],
               app["application_id"]).json()["keys"]
    assert [k["id"] for k in keys] == [kept.json()["key_id"]]

    again = cli("applications", "revoke-key", "--tenant", tenant["tenant_id"],
                app["application_id"], new["key_id"])
    assert (again.status, again.stderr) == (
        1, "vaultgraph: No key with this id for this application: check the ids (vaultgraph "
           "tenants list, vaultgraph applications list --tenant ID)\n")


def test_invalid_application_is_a_usage_error(cli):
    tenant = new_tenant(cli)
    result = cli("applications", "create", "--tenant", tenant["tenant_id"], "--name", "x",
                 "--permission", "token:fly")
    assert result.status == 2
    assert result.stderr.startswith('vaultgraph: invalid input {"permissions":')
    assert result.stderr.count("\n") == 1


async def test_keys_rotate_online_and_resumable(cli, client, kek_file):
    first, second = new_tenant(cli, "first"), new_tenant(cli, "second")
    resp = await client.post("/tokens", json={"type": "token", "data": {"secret": "s3cret"}},
                             headers={"SVC-API-KEY": first["key"]})
    assert resp.status == 201, await resp.text()
    token_id = (await resp.json())["id"]
    k1 = kek_file.read_text().strip()

    result = cli("keys", "rotate", "--tenant", first["tenant_id"])
    assert result.status == 0, result.stderr
    assert result.json() == {"active_key_version": "k2", "rewrapped": 1,
                             "already_current": 0, "failed": []}
    assert result.stderr.startswith(f"added key-encryption key version k2 to {kek_file}\n")
    ring = kek_file.read_text().strip()
    assert ring.startswith(k1 + ",k2:") and stat.S_IMODE(kek_file.stat().st_mode) == 0o600
    assert cli("tenants", "show", first["tenant_id"]).json()["kek_versions"] == ["k2"]
    assert cli("tenants", "show", second["tenant_id"]).json()["kek_versions"] == ["k1"]

    # The running app started with k1 only: it follows the key file, no restart.
    resp = await client.get(f"/tokens/{token_id}", headers={"SVC-API-KEY": first["key"]})
    assert resp.status == 200, await resp.text()
    assert (await resp.json())["data"] == {"secret": "s3cret"}

    # An unfinished rotation (the second tenant) is resumed, not restarted with another key.
    both = ["--tenant", first["tenant_id"], "--tenant", second["tenant_id"]]
    resumed = cli("keys", "rotate", *both)
    assert resumed.status == 0, resumed.stderr
    assert resumed.stderr.startswith("resuming: 1 tenant(s) still wrapped under an older key; "
                                     "re-wrapping under k2\n")
    assert resumed.json() == {"active_key_version": "k2", "rewrapped": 1,
                              "already_current": 1, "failed": []}
    assert kek_file.read_text().strip() == ring
    assert cli("tenants", "show", second["tenant_id"]).json()["kek_versions"] == ["k2"]
    assert await status_of(client, second["key"]) == 200


def test_keys_rotate_refuses_a_ring_from_the_environment(cli, kek_file):
    tenant = new_tenant(cli)
    result = cli("keys", "rotate", "--tenant", tenant["tenant_id"],
                 env={"VAULTGRAPH_KEK": kek_file.read_text().strip()})
    assert (result.status, result.stdout, result.stderr) == (
        1, "", "vaultgraph: the key ring comes from VAULTGRAPH_KEK, which this command cannot "
               "change: append a new '<version>:<base64url key>' entry to VAULTGRAPH_KEK on "
               "every replica, restart them, then run vaultgraph keys rotate again\n")


async def test_audit_export_and_verify(cli, client, tmp_path):
    tenant = new_tenant(cli)
    since = datetime.now(UTC).isoformat()  # after the event of `tenants create`
    for _ in range(3):
        assert await status_of(client, tenant["key"]) == 200
    services = client.server.app[services_key]
    await services.audit_writer.settle()

    out = tmp_path / "events.jsonl"
    exported = cli("audit", "export", "--since", since, "--out", str(out))
    assert exported.status == 0, exported.stderr
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    mine = [e for e in map(orjson.loads, out.read_bytes().splitlines())
            if e.get("tenant_id") == tenant["tenant_id"]]
    assert [e["route"] for e in mine] == ["GET /applications/self"] * 3
    assert [e["seq"] for e in mine] == sorted(e["seq"] for e in mine)
    [chain] = {e["chain"] for e in mine}
    # Each line whole, the hex MAC included (the store keeps it as bytes), and no `prev`: the
    # writer's chain is placed (audit/chain.py), so each line verifies on its own as it reads.
    assert all(len(e["mac"]) == 64 and e["prev"] is None for e in mine)
    assert all(sign(services.audit_log._ring, e) == e["mac"] for e in mine)
    to_stdout = cli("audit", "export", "--since", since)
    assert [e for e in to_stdout.lines() if e.get("tenant_id") == tenant["tenant_id"]] == mine

    ok = cli("audit", "verify", "--chain", chain)
    assert (ok.status, ok.stdout) == (0, ""), ok.stderr
    assert ok.stderr.splitlines()[-1].startswith("verified events ")
    assert ok.stderr.splitlines()[-1].endswith(" checked, 0 finding(s)")

    await services.database.driver.execute_query(
        "MATCH (e:AuditEvent {id: $id}) SET e.status = 500", id=mine[1]["id"])
    bad = cli("audit", "verify", "--chain", chain)
    assert bad.status == 1
    assert bad.lines() == [{"kind": "edited", "chain": chain, "seq": mine[1]["seq"],
                            "event_id": mine[1]["id"]}]
    assert bad.stderr.splitlines()[-1] == (
        "vaultgraph: the audit trail fails verification (1 finding(s), listed on stdout): "
        "investigate the named events; the trail was changed outside the service")

    bad_date = cli("audit", "export", "--since", "yesterday")
    assert (bad_date.status, bad_date.stderr) == (
        2, "vaultgraph: --since is not an ISO 8601 date or time from year 1 to 9999: use e.g. "
           "2026-01-31 or 2026-01-31T12:00:00Z\n")
    # A time whose offset puts it in year 10000 (or 0) in UTC: the same line, not "unexpected".
    for option, value in (("--until", "9999-12-31T23:59:59-05:00"),
                          ("--since", "0001-01-01T00:00:00+05:00")):
        beyond = cli("audit", "export", option, value)
        assert (beyond.status, beyond.stderr) == (
            2, f"vaultgraph: {option} is not an ISO 8601 date or time from year 1 to 9999: use "
               "e.g. 2026-01-31 or 2026-01-31T12:00:00Z\n")


async def test_audit_prune_then_a_key_rotation_leaves_the_trail_verifying(cli, client, kek_file):
    """`audit prune` runs one pass now (progress on stderr, the count on stdout) and signs each
    checkpoint under the active key version, naming it: after `keys rotate` the pruned chains
    still verify (their checkpoints were named edited)."""
    tenant = new_tenant(cli)
    for _ in range(3):
        assert await status_of(client, tenant["key"]) == 200
    services = client.server.app[services_key]
    await services.audit_writer.settle()
    chains = sorted(services.audit_writer.chains)
    for chain in chains:  # made two days ago
        await retime_chain(services, chain, lambda e: datetime(2000, 1, 1, tzinfo=UTC))

    pruned = cli("audit", "prune", env={"VAULTGRAPH_AUDIT_RETENTION_DAYS": "1"})
    assert pruned.status == 0, pruned.stderr
    assert pruned.json()["pruned"] >= 3
    assert re.fullmatch(r"pruned events \d+ deleted, older than \S+",
                        pruned.stderr.splitlines()[-1])
    checkpoints = await services.database.driver.execute_query(
        "MATCH (k:AuditCheckpoint) WHERE k.chain IN $chains RETURN k.chain AS chain, "
        "k.key_version AS version", chains=chains)
    pruned_chains = [r["chain"] for r in checkpoints.records]
    assert [r["version"] for r in checkpoints.records] == ["k1"] * len(pruned_chains) != []

    assert cli("keys", "rotate", "--tenant", tenant["tenant_id"]).status == 0
    verified = cli("audit", "verify", *(a for c in pruned_chains for a in ("--chain", c)))
    assert (verified.status, verified.stdout) == (0, ""), verified.stderr


async def test_audit_verify_names_a_key_that_did_not_sign_or_is_missing_not_tampering(
        cli, client, kek_file):
    """With a wrong key-encryption key, or a ring without the version that signed, `verify`
    says so in one line and exits 3: no finding per event, no "changed outside the service"."""
    tenant = new_tenant(cli)
    for _ in range(3):
        assert await status_of(client, tenant["key"]) == 200
    services = client.server.app[services_key]
    await services.audit_writer.settle()
    chain = services.audit_writer.chain
    n = len([e async for e in services.audit_log._repo.chain_events(chain)])
    wrong = cli("audit", "verify", "--chain", chain,
                env={"VAULTGRAPH_KEK": KeyRing.generate_spec(), "VAULTGRAPH_KEK_FILE": None})
    assert (wrong.status, wrong.stdout) == (3, "")
    assert wrong.stderr.splitlines()[-1] == (
        "vaultgraph: the audit trail could not be checked with this key ring: key version k1 in "
        f"the key ring is not the key that signed {n} event(s): verify with the key ring that "
        "signed it (every version named, VAULTGRAPH_KEK_FILE, VAULTGRAPH_KEK or the PKCS#11 "
        "token's keys); until then nothing it signed is verified")
    other = "k9:" + KeyRing.generate_spec().partition(":")[2]
    lacking = cli("audit", "verify", "--chain", chain,
                  env={"VAULTGRAPH_KEK": other, "VAULTGRAPH_KEK_FILE": None})
    assert (lacking.status, lacking.stdout) == (3, "")
    assert (f"key version k1 is not in the key ring ({n} event(s) signed under it)"
            in lacking.stderr.splitlines()[-1])
    assert cli("audit", "verify", "--chain", chain).status == 0


@pytest.fixture(scope="module")
def empty_neo4j(tmp_path_factory):
    """A Neo4j of these tests' own with no tenant in it: the suite's holds other tests'."""
    with private_neo4j(tmp_path_factory.mktemp("neo4j-bootstrap")) as neo:
        yield neo


def test_bootstrap_key_never_reaches_a_redirected_stderr(settings, empty_neo4j, tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    local = dataclasses.replace(settings, home=str(home), neo4j_uri=empty_neo4j.uri,
                                neo4j_password=PRIVATE_PASSWORD)
    err = io.StringIO()
    with redirect_stderr(err):
        bootstrap(local)
    key = (home / "admin.key").read_text().strip()
    assert key.startswith("vg_") and key not in err.getvalue()
    assert stat.S_IMODE(os.stat(home / "admin.key").st_mode) == 0o600
    assert f"admin key      in {home / 'admin.key'} (mode 0600; not printed: stderr is not a " \
           "terminal)" in err.getvalue()

    # The bootstrap's tenant and its full-permission key are in the trail, as `tenants create`
    # leaves them: one event, from the command line, naming the tenant and never the key.
    async def events():
        async with services(local) as svc:
            await svc.audit_writer.settle()
            records, _, _ = await svc.database.driver.execute_query(
                "MATCH (e:AuditEvent) RETURN properties(e) AS e", database_=local.neo4j_database)
            return [dict(r["e"]) for r in records]

    [stored] = run_async(events)
    event = event_of(stored)
    admin = orjson.loads((home / "admin.json").read_text())
    assert (event["route"], event["operation"], event["tenant_id"], event["application_id"],
            event["status"]) == ("CLI serve", "application:create", admin["tenant_id"],
                                 admin["application_id"], 201)
    assert key not in orjson.dumps(stored, default=str).decode()

    # The key moved off the machine: the next start makes no second tenant and no new key.
    (home / "admin.key").unlink()
    err = io.StringIO()
    with redirect_stderr(err):
        bootstrap(local)
    assert err.getvalue() == (
        f"admin key: {home / 'admin.key'} is absent and tenants exist, so none was "
        "bootstrapped (vaultgraph tenants create makes another)\n")
    assert not (home / "admin.key").exists()

    async def names():
        async with services(local) as svc:
            return [row["name"] for row in await svc.tenants.page("", 10)]

    assert run_async(names) == ["default"]


def test_unknown_ids_are_errors_not_empty_successes(cli, kek_file):
    tenant = new_tenant(cli)
    ring = kek_file.read_text()
    unknown = "00000000-0000-4000-8000-000000000000"

    rotated = cli("keys", "rotate", "--tenant", tenant["tenant_id"], "--tenant", "t-typo")
    assert (rotated.status, rotated.stdout, rotated.stderr) == (
        1, "", "vaultgraph: no tenant with the id t-typo: check the ids (vaultgraph tenants "
               "list); no key was added\n")
    assert kek_file.read_text() == ring  # no k2 for a typo

    verified = cli("audit", "verify", "--chain", "no-such-chain")
    assert (verified.status, verified.stdout, verified.stderr.splitlines()[-1]) == (
        1, "", 'vaultgraph: No audit chain no-such-chain: the chain ids are the "chain" of the '
               "events vaultgraph audit export writes")

    listed = cli("applications", "list", "--tenant", unknown)
    assert (listed.status, listed.stdout, listed.stderr) == (
        1, "", "vaultgraph: No tenant with this id: check the ids (vaultgraph tenants list, "
               "vaultgraph applications list --tenant ID)\n")


def _export_to_a_closed_pipe(cli) -> tuple[int, str]:
    import subprocess

    from .conftest import VAULTGRAPH

    with subprocess.Popen([VAULTGRAPH, "audit", "export"], env=cli.env, cwd=cli.cwd,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE) as proc:
        proc.stdout.close()  # before the first event is written: every write meets a closed pipe
        stderr = proc.stderr.read().decode()
        return proc.wait(timeout=120), stderr


async def test_audit_export_to_a_closed_pipe_ends_quietly(cli, client):
    """`vaultgraph audit export | head`: the reader goes away; the export stops without a
    word (it used to end in "unexpected UnboundLocalError"), status 128 + SIGPIPE."""
    import asyncio
    import signal

    tenant = new_tenant(cli)
    assert await status_of(client, tenant["key"]) == 200
    await client.server.app[services_key].audit_writer.settle()
    assert await asyncio.to_thread(_export_to_a_closed_pipe, cli) == (128 + signal.SIGPIPE, "")


async def test_audit_export_out_replaces_the_file_only_when_done(cli, client, tmp_path):
    tenant = new_tenant(cli)
    since = datetime.now(UTC).isoformat()  # after the event of `tenants create`
    assert await status_of(client, tenant["key"]) == 200
    await client.server.app[services_key].audit_writer.settle()
    out = tmp_path / "events.jsonl"
    out.write_text("the previous export\n")
    out.chmod(0o644)

    failed = cli("audit", "export", "--since", since, "--out", str(out),
                 env={"VAULTGRAPH_NEO4J_URI": "neo4j://127.0.0.1:1"})
    assert failed.status == 1 and failed.stderr.startswith("vaultgraph: cannot reach Neo4j")
    assert out.read_text() == "the previous export\n"  # not truncated before the export began
    assert sorted(p.name for p in tmp_path.iterdir()) == ["elsewhere", "events.jsonl", "kek"]

    done = cli("audit", "export", "--since", since, "--out", str(out))
    assert done.status == 0, done.stderr
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    assert [e["route"] for e in map(orjson.loads, out.read_bytes().splitlines())
            if e.get("tenant_id") == tenant["tenant_id"]] == ["GET /applications/self"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["elsewhere", "events.jsonl", "kek"]
