"""`vaultgraph applications`: create, list, show, and their API keys (revoke-key, rotate-key)."""

from __future__ import annotations

import argparse

import orjson

from ..failures import Failure
from ..settings import Settings
from .common import PAGE, KeyOutput, audited, emit, run_async, services


def add_parser(sub) -> None:
    p_app = sub.add_parser("applications", help="applications and their API keys")
    app = p_app.add_subparsers(dest="action", required=True)
    p = app.add_parser("create",
                       help="create an application in a tenant; prints its id and its key (once)")
    p.add_argument("--tenant", required=True, help="the tenant id")
    p.add_argument("--name", required=True)
    p.add_argument("--permission", action="append", default=[], metavar="P",
                   help="a permission, e.g. token:read (repeat for more)")
    p.add_argument("--rule", action="append", default=[], metavar="JSON",
                   help='an access rule, e.g. \'{"container": "/pci/", "transform": "mask", '
                        '"permissions": ["token:read"]}\' (repeat for more)')
    p.add_argument("--key-file", metavar="PATH",
                   help="write the key to this new 0600 file instead of stdout")
    p = app.add_parser("list", help="a tenant's applications, one JSON object per line")
    p.add_argument("--tenant", required=True, help="the tenant id")
    p = app.add_parser("show", help="one application with its working keys (ids only)")
    p.add_argument("--tenant", required=True, help="the tenant id")
    p.add_argument("application_id")
    p = app.add_parser("revoke-key", help="revoke one key of an application")
    p.add_argument("--tenant", required=True, help="the tenant id")
    p.add_argument("application_id")
    p.add_argument("key_id")
    p = app.add_parser("rotate-key", help="issue a new key (printed once) and revoke the old ones")
    p.add_argument("--tenant", required=True, help="the tenant id")
    p.add_argument("application_id")
    p.add_argument("--keep-old", action="store_true",
                   help="keep the old keys working (revoke them later with revoke-key)")
    p.add_argument("--key-file", metavar="PATH",
                   help="write the key to this new 0600 file instead of stdout")


def _parse_rules(rules: list[str]) -> list:
    try:
        raw = [orjson.loads(rule) for rule in rules]
    except orjson.JSONDecodeError:
        raise Failure("every --rule must be a JSON object", "see vaultgraph applications "
                      "create --help", status=2) from None
    return raw


# The actions that change the tenant's access: each leaves an event in the tenant's audit trail
# (docs/audit.md, "The command line"), signed under the audit key the key ring gives, so they
# open the ring (and check it against the stored tenant keys, as `serve` does, so the events
# verify under the ring the service uses); `list` and `show` read and leave none.
CHANGES = ("create", "revoke-key", "rotate-key")
# A revocation made by rotate-key (not asked for one by one with revoke-key).
ROTATED = "rotated"


def command(settings: Settings, args: argparse.Namespace) -> int:
    from ..applications.view import application_body, key_body
    from ..audit.command import Affected, CommandTrail, EventNotLinked
    from ..auth.permissions import APPLICATION_CREATE, APPLICATION_UPDATE
    from ..services.applications import operator, parse_draft

    caller = operator(args.tenant)
    draft = (parse_draft({"name": args.name, "permissions": args.permission,
                          "rules": _parse_rules(args.rule)})
             if args.action == "create" else None)
    changes = args.action in CHANGES

    async def work(out: KeyOutput):
        async with services(settings, with_keys=changes, wraps_keys=changes) as svc:
            apps = svc.applications
            trail = (CommandTrail(svc.audit_writer, f"applications {args.action}")
                     if changes else None)
            if args.action == "create":
                async def create():
                    new = await apps.create(args.tenant, draft, grantor=None)
                    return ({"application_id": new.application.id, "key": new.key},
                            Affected(args.tenant, new.application.id, new.key_id))

                return out.deliver(await audited(
                    trail, APPLICATION_CREATE, Affected(args.tenant), create, status=201,
                    deliver=out.deliver))
            if args.action == "show":
                app = await apps.get(caller, args.application_id)
                keys = await apps.keys(caller, args.application_id)
                return {**application_body(app), "keys": [key_body(k) for k in keys]}
            if args.action == "list":
                cursor = None
                while True:
                    page, cursor = await apps.page(caller, PAGE, cursor)
                    for app in page:
                        emit(application_body(app))
                    if cursor is None:
                        return None

            def revoke(key_id: str):
                async def revoke_key():
                    await apps.revoke_key(caller, args.application_id, key_id)
                    return None, Affected(args.tenant, args.application_id, key_id)

                return revoke_key

            if args.action == "revoke-key":
                await audited(trail, APPLICATION_UPDATE,
                              Affected(args.tenant, args.application_id, args.key_id),
                              revoke(args.key_id), status=204)
                return {"application_id": args.application_id, "revoked": [args.key_id]}
            # rotate-key: a new key first, delivered (its file written), then the old ones
            # revoked (unless --keep-old). A revoke that fails still prints the new key (with
            # what was revoked): the application never loses every key someone holds. Each
            # step is a change of its own, with its own event (the revocations' reason
            # `rotated`), as the HTTP routes it does the work of make them.
            old = await apps.keys(caller, args.application_id)

            async def issue():
                info, key = await apps.create_key(caller, args.application_id)
                return ({"application_id": args.application_id, "key_id": info.id, "key": key,
                         "revoked": []},
                        Affected(args.tenant, args.application_id, info.id))

            result = out.deliver(await audited(
                trail, APPLICATION_UPDATE, Affected(args.tenant, args.application_id), issue,
                status=201, deliver=out.deliver))
            revoked: list[str] = result["revoked"]
            try:
                for k in [] if args.keep_old else old:
                    try:
                        await trail.change(APPLICATION_UPDATE,
                                           Affected(args.tenant, args.application_id, k.id),
                                           revoke(k.id), status=204, reason=ROTATED)
                    except EventNotLinked as exc:
                        revoked.append(k.id)  # revoked: only its event is not linked
                        raise Failure(*exc.explained()) from None
                    revoked.append(k.id)
            except BaseException:
                emit(result)
                raise
            return result

    with KeyOutput.open(getattr(args, "key_file", None)) as out:
        result = run_async(lambda: work(out))
    if result is not None:
        emit(result)
    return 0
