"""`vaultgraph tenants`: create (with its management application and key), list, show."""

from __future__ import annotations

import argparse

from ..documentation import page
from ..settings import Settings
from .common import PAGE, KeyOutput, audited, emit, run_async, services


def add_parser(sub) -> None:
    p_ten = sub.add_parser("tenants", help="tenants")
    ten = p_ten.add_subparsers(dest="action", required=True)
    p = ten.add_parser("create", help="create a tenant and its management application; prints "
                       "tenant_id, application_id and key (once)")
    p.add_argument("--name", required=True,
                   help="printable, not only spaces, and short enough for its administrator "
                        "application's name, '<name> administrator', to be a valid application "
                        f"name ({page('operations.md', 'Command line')})")
    p.add_argument("--key-file", metavar="PATH",
                   help="write the key to this new 0600 file instead of stdout")
    ten.add_parser("list", help="every tenant, one JSON object per line")
    p = ten.add_parser("show", help="one tenant")
    p.add_argument("tenant_id")


def tenant_maker(svc, name: str):
    """The change that makes the tenant, its administrator application and key, for
    `CommandTrail.change` (audit/command.py): its event goes in the new tenant's trail
    (docs/audit.md, "The command line") as operation `application:create`, since the
    administrator application's creation, which holds every permission, is what the trail must
    show."""
    from ..audit.command import Affected

    async def made():
        new = await svc.tenants.create(name)
        return new.to_dict(), Affected(new.tenant_id, new.application_id, new.key_id)

    return made


async def create(settings: Settings, name: str, out: KeyOutput) -> dict:
    """`tenants create`: the tenant with its event; made but not linked, the key is still
    delivered and the command fails with one line (`common.audited`)."""
    from ..audit.command import Affected, CommandTrail
    from ..auth.permissions import APPLICATION_CREATE

    async with services(settings, wraps_keys=True) as svc:
        return await audited(CommandTrail(svc.audit_writer, "tenants create"),
                             APPLICATION_CREATE, Affected(), tenant_maker(svc, name),
                             status=201, deliver=out.deliver)


def command(settings: Settings, args: argparse.Namespace) -> int:
    if args.action == "create":
        from ..services.tenants import check_tenant_name

        check_tenant_name(args.name)  # before a key file is made or Neo4j is reached
        with KeyOutput.open(args.key_file) as out:
            emit(out.deliver(run_async(lambda: create(settings, args.name, out))))
        return 0

    async def work():
        async with services(settings) as svc:
            if args.action == "show":
                emit(await svc.tenants.get(args.tenant_id))
                return
            after = ""
            while rows := await svc.tenants.page(after, PAGE):
                for row in rows:
                    emit(row)
                after = rows[-1]["id"]

    run_async(work)
    return 0
