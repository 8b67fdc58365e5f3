"""A throwaway SoftHSM2 token for the key-custody tests (Debian's softhsm2; `make test-deps`).

One configuration and one token per run, made before anything in this process loads the PKCS#11
module (SoftHSM reads `SOFTHSM2_CONF` when the module initialises, and the module stays loaded):
each test takes key labels of its own, so tests never see each other's keys. The token's
directory can be moved away and back (`SoftHsm.away`) to take the token from a running service.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import secrets
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from vaultgraph.settings import Settings

MODULE = "/usr/lib/softhsm/libsofthsm2.so"
USER_PIN = "20261127"
SO_PIN = "11272026"


@dataclasses.dataclass
class SoftHsm:
    conf: Path
    tokens: Path
    label: str
    pin_file: Path

    @contextlib.contextmanager
    def away(self) -> Iterator[None]:
        """The token gone (its directory moved aside, an empty one in its place), then back."""
        aside = self.tokens.with_name(self.tokens.name + "-aside")
        self.tokens.rename(aside)
        self.tokens.mkdir()
        try:
            yield
        finally:
            self.tokens.rmdir()
            aside.rename(self.tokens)

    def key_attributes(self, label: str) -> str:
        """What pkcs11-tool (another process, another PKCS#11 client) says of the key."""
        out = subprocess.run(
            ["pkcs11-tool", "--module", MODULE, "--token-label", self.label, "--login",
             "--pin", USER_PIN, "--list-objects", "--type", "secrkey", "--label", label],
            env={**os.environ, "SOFTHSM2_CONF": str(self.conf)}, capture_output=True,
            text=True, check=True, timeout=60)
        return out.stdout


@pytest.fixture(scope="session")
def softhsm(tmp_path_factory) -> Iterator[SoftHsm]:
    if not Path(MODULE).exists() or shutil.which("softhsm2-util") is None:
        pytest.fail("SoftHSM2 is not installed: `make test` installs Debian's softhsm2")
    root = tmp_path_factory.mktemp("softhsm")
    tokens = root / "tokens"
    tokens.mkdir()
    conf = root / "softhsm2.conf"
    conf.write_text(f"directories.tokendir = {tokens}\nobjectstore.backend = file\n"
                    "log.level = ERROR\n")
    label = f"vg-{secrets.token_hex(4)}"
    env = {**os.environ, "SOFTHSM2_CONF": str(conf)}
    subprocess.run(["softhsm2-util", "--init-token", "--free", "--label", label,
                    "--so-pin", SO_PIN, "--pin", USER_PIN], env=env, check=True,
                   capture_output=True, timeout=60)
    pin_file = root / "pin"
    pin_file.write_text(USER_PIN + "\n")
    pin_file.chmod(0o600)
    before = os.environ.get("SOFTHSM2_CONF")
    os.environ["SOFTHSM2_CONF"] = str(conf)  # this process's module, and every child's
    yield SoftHsm(conf, tokens, label, pin_file)
    if before is None:
        os.environ.pop("SOFTHSM2_CONF", None)
    else:
        os.environ["SOFTHSM2_CONF"] = before


def key_label(prefix: str = "kek") -> str:
    """A key label no other test (or run) uses."""
    return f"{prefix}-{secrets.token_hex(5)}"


@pytest.fixture
def hsm_settings(settings, softhsm, own_tenants_only) -> Settings:
    """The suite's settings with the pkcs11 provider and a key label of this test's own (no
    file KEK: the token alone holds the key-encryption key); other tests' tenants set aside
    (some tests here add a file ring `k1` of their own)."""
    return dataclasses.replace(
        settings, kek="", kek_file=str(Path(softhsm.tokens).parent / "no-such-kek"),
        kek_provider="pkcs11", pkcs11_module=MODULE, pkcs11_token_label=softhsm.label,
        pkcs11_pin_file=str(softhsm.pin_file), pkcs11_key_label=key_label(),
        pkcs11_sessions=4)


def vault_env(settings: Settings, home: Path) -> dict[str, str]:
    """The environment of a `vaultgraph` command (a process of its own) with these settings'
    Neo4j and key custody."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("VAULTGRAPH_")}
    env.update({
        "VAULTGRAPH_HOME": str(home), "VAULTGRAPH_NEO4J_URI": settings.neo4j_uri,
        "VAULTGRAPH_NEO4J_PASSWORD": settings.resolved_neo4j_password(),
        "VAULTGRAPH_KEK_PROVIDER": settings.kek_provider, "VAULTGRAPH_LOG_LEVEL": "WARNING",
        "VAULTGRAPH_PORT": "0", "VAULTGRAPH_SHARED_DATABASE": str(settings.shared_database).lower(),
    })
    if settings.kek:
        env["VAULTGRAPH_KEK"] = settings.kek
    if settings.kek_file:
        env["VAULTGRAPH_KEK_FILE"] = settings.kek_file
    if settings.cypher_dir:  # the catalog the run reads (a checkout's, not the installed one)
        env["VAULTGRAPH_CYPHER_DIR"] = settings.cypher_dir
    for name in ("pkcs11_module", "pkcs11_token_label", "pkcs11_pin_file", "pkcs11_key_label"):
        if getattr(settings, name):
            env["VAULTGRAPH_" + name.upper()] = str(getattr(settings, name))
    return env


def vaultgraph(env: dict[str, str], *args: str, timeout: float = 120):
    """`vaultgraph ARGS` in its own process; the CompletedProcess (text)."""
    return subprocess.run([sys.executable, "-m", "vaultgraph", *args], env=env,
                          capture_output=True, text=True, timeout=timeout, check=False)
