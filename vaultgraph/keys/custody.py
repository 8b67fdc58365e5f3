"""Which key-encryption keys the service holds, by provider (docs/key-custody.md).

`VAULTGRAPH_KEK_PROVIDER=file` (the default, for development): the key ring comes from the key
file or `VAULTGRAPH_KEK`, and its last version wraps new tenant keys. `pkcs11`: the key labelled
`VAULTGRAPH_PKCS11_KEY_LABEL` in the token wraps them; when absent it is generated inside the
token by the service's start-up or a rotation into it, and named as missing by every other
command (`open_custody(generate=False)`). Either way the ring unwraps whatever the other
provider wrapped while both are configured, so a rotation between providers runs online with
nothing unreadable at any moment: a file ring still configured beside a token unwraps the
tenants not yet moved, and a token configured beside the file provider (module, token label and
PIN set) unwraps those moved.
"""

from __future__ import annotations

import logging
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..crypto import CryptoError, Kek, KeyRing, parse_spec
from ..documentation import page
from ..settings import ConfigError, Settings
from .pkcs11 import PREFIX, Pkcs11Token, TokenError, TokenKek, read_pin, require_library

log = logging.getLogger("vaultgraph.keys")

DEVELOPMENT_ONLY = ("key-encryption key from a file (VAULTGRAPH_KEK_PROVIDER=file): for "
                    f"development; keep it in an HSM in production ({page('key-custody.md')})")


def token_configured(settings: Settings) -> bool:
    return settings.kek_provider == "pkcs11" or bool(settings.pkcs11_module)


def file_configured(settings: Settings) -> bool:
    return bool(settings.kek) or settings.kek_path.exists()


def file_keks(settings: Settings) -> dict[str, bytes]:
    """The file provider's key ring (empty when none is configured and the token wraps)."""
    if settings.kek_provider != "file" and not file_configured(settings):
        return {}
    spec = settings.resolved_kek()
    try:
        return parse_spec(spec)
    except ValueError as exc:  # the message names an entry by position, never key bytes
        raise ConfigError(f"the key-encryption key in {settings.kek_source} is malformed ({exc})",
                          "expected '<version>:<base64url of 32 bytes>[,...]', e.g. "
                          "k1:$(head -c32 /dev/urandom | basenc --base64url)") from None


def exposed_key_files(settings: Settings) -> list[tuple[str, Path, int]]:
    """The key files the configured providers read (the key ring's, the PIN's) whose mode
    gives group or others any access (a bit of 0o077, ssh's rule for a private key), each as
    (its setting, its path, its mode). Only the mode is looked at, never the content."""
    files = []
    if not settings.kek:
        files.append(("VAULTGRAPH_KEK_FILE", settings.kek_path))
    if token_configured(settings) and settings.pkcs11_pin_file:
        files.append(("VAULTGRAPH_PKCS11_PIN_FILE", Path(settings.pkcs11_pin_file)))
    found = []
    for setting, path in files:
        try:
            mode = stat.S_IMODE(os.stat(path).st_mode)  # a symlink's target (Kubernetes')
        except OSError:  # absent or unreadable: reading it says so
            continue
        if mode & 0o077:
            found.append((setting, path, mode))
    return found


def open_token(settings: Settings) -> Pkcs11Token:
    """The token, logged in with its session pool; `TokenError` (one line) if it cannot be."""
    missing = [name for name, value in (("VAULTGRAPH_PKCS11_MODULE", settings.pkcs11_module),
                                        ("VAULTGRAPH_PKCS11_TOKEN_LABEL",
                                         settings.pkcs11_token_label)) if not value]
    if missing:
        raise TokenError(f"{' and '.join(missing)} not set (the PKCS#11 provider needs the "
                         "token's library and label)")
    require_library("VAULTGRAPH_KEK_PROVIDER=pkcs11" if settings.kek_provider == "pkcs11" else
                    "VAULTGRAPH_PKCS11_MODULE (a token configured beside the key file, to "
                    "unwrap the tenants moved into it)")
    token = Pkcs11Token(settings.pkcs11_module, settings.pkcs11_token_label,
                        read_pin(settings.pkcs11_pin_file), sessions=settings.pkcs11_sessions)
    try:
        token.connect()
    except BaseException:
        token.close()
        raise
    return token


@dataclass
class Custody:
    """The service's key ring and what holds it; `close` ends the token's sessions."""

    provider: str
    ring: KeyRing
    token: Pkcs11Token | None
    settings: Settings
    generated: list[str] = field(default_factory=list)  # token keys this process generated

    def reload(self) -> KeyRing:
        """The ring again with the key file re-read (a file version added by `keys rotate`
        while this process runs); the token's keys are looked up as blobs name them."""
        return build_ring(self.settings, self.token)

    def target(self, spec: str) -> KeyRing:
        """The ring with `spec` active: "file" (the key file's last version) or
        "pkcs11:<label>" (generated in the token when absent). `TokenError` when that
        provider is not configured."""
        if spec == "file":
            keks = file_keks(self.settings)
            if not keks:
                raise ConfigError("--to file: no file key-encryption key is configured",
                                  "set VAULTGRAPH_KEK_FILE or VAULTGRAPH_KEK")
            return build_ring(self.settings, self.token).with_active(list(keks)[-1])
        if not spec.startswith(PREFIX):
            raise ConfigError(f"--to {spec!r} names no provider",
                              "use --to file or --to pkcs11:<key label>")
        label = spec[len(PREFIX):]
        if self.token is None:
            raise TokenError("--to pkcs11:... needs the token: set VAULTGRAPH_PKCS11_MODULE, "
                             "VAULTGRAPH_PKCS11_TOKEN_LABEL and VAULTGRAPH_PKCS11_PIN_FILE")
        if ensure_key(self.token, label):
            self.generated.append(label)
        return self.ring.with_active(spec)

    def close(self) -> None:
        if self.token is not None:
            self.token.close()


def ensure_key(token: Pkcs11Token, label: str, *, generate: bool = True) -> bool:
    """Find the key `label`, or generate it in the token and say so (once: the next start
    finds it) when `generate`; absent and not `generate`: `TokenError` naming the label and
    the token. True when generated."""
    if not token.ensure_key(label, generate=generate):
        return False
    log.warning("generated the key-encryption key inside the PKCS#11 token (sensitive, never "
                "extractable)", extra={"token": token.token_label, "key": label})
    return True


def build_ring(settings: Settings, token: Pkcs11Token | None) -> KeyRing:
    keys: dict[str, bytes | Kek] = dict(file_keks(settings))
    if settings.kek_provider == "pkcs11":
        assert token is not None
        active = PREFIX + settings.pkcs11_key_label
        keys[active] = TokenKek(token, settings.pkcs11_key_label)
    else:
        active = list(keys)[-1]

    def resolve(kek_id: str) -> Kek | None:
        if token is None or not kek_id.startswith(PREFIX):
            return None
        return TokenKek(token, kek_id[len(PREFIX):])

    return KeyRing(keys, active, resolve=resolve,
                   executor=token.executor if token is not None else None)


def open_custody(settings: Settings, *, generate: bool = True) -> Custody:
    """Open the configured provider (blocking: the token is reached, logged in and its key
    found, or generated when `generate`: the service's start-up and a rotation into the token
    create it, a command that only reads or writes tenant data never does). Raises
    `ConfigError`/`TokenError` with one line when it cannot."""
    token = open_token(settings) if token_configured(settings) else None
    generated = []
    try:
        if settings.kek_provider == "pkcs11" and ensure_key(token, settings.pkcs11_key_label,
                                                            generate=generate):
            generated.append(settings.pkcs11_key_label)
        ring = build_ring(settings, token)
        try:
            ring.audit_mac(b"")  # the active audit key, derived now: the writer signs on the loop
        except CryptoError:
            raise TokenError(f"the key-encryption key {ring.active} cannot derive the audit "
                             "trail's MAC key (the token must allow AES-CMAC sign with it)") \
                from None
    except BaseException:
        if token is not None:
            token.close()
        raise
    return Custody(settings.kek_provider, ring, token, settings, generated)


def describe(custody: Custody) -> dict[str, Any]:
    """What `keys status` says of the provider and active KEK (never key bytes)."""
    body: dict[str, Any] = {"provider": custody.provider, "active_kek": custody.ring.active,
                            "keks": list(custody.ring.versions)}
    if custody.token is not None:
        body["token"] = custody.token.token_label
        if custody.ring.active.startswith(PREFIX):
            body["active_key"] = custody.token.key_facts(custody.ring.active[len(PREFIX):])
    return body
