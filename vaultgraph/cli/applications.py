"""`vaultgraph applications`: create, list, show, and their API keys (revoke-key, rotate-key)."""

from __future__ import annotations

import argparse

import orjson

from ..failures import Failure
from ..settings import Settings
from .common import PAGE, KeyOutput, emit, run_async, services


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


def command(settings: Settings, args: argparse.Namespace) -> int:
    from ..applications.view import application_body, key_body
    from ..services.applications import operator, parse_draft

    caller = operator(args.tenant)
    draft = (parse_draft({"name": args.name, "permissions": args.permission,
                          "rules": _parse_rules(args.rule)})
             if args.action == "create" else None)

    async def work(out: KeyOutput):
        async with services(settings, with_keys=False) as svc:
            apps = svc.applications
            if args.action == "create":
                app, key = await apps.create(args.tenant, draft, grantor=None)
                return out.deliver({"application_id": app.id, "key": key})
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
            if args.action == "revoke-key":
                await apps.revoke_key(caller, args.application_id, args.key_id)
                return {"application_id": args.application_id, "revoked": [args.key_id]}
            # rotate-key: a new key first, delivered (its file written), then the old ones
            # revoked (unless --keep-old). A revoke that fails still prints the new key (with
            # what was revoked): the application never loses every key someone holds.
            old = await apps.keys(caller, args.application_id)
            info, key = await apps.create_key(caller, args.application_id)
            revoked: list[str] = []
            result = out.deliver({"application_id": args.application_id, "key_id": info.id,
                                  "key": key, "revoked": revoked})
            try:
                for k in [] if args.keep_old else old:
                    await apps.revoke_key(caller, args.application_id, k.id)
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
