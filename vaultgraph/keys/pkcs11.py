"""Key-encryption keys inside a PKCS#11 token (an HSM, a cloud HSM, SoftHSM2).

The KEK is an AES-256 secret key object, found by its label, created sensitive and never
extractable: its bytes never enter this process. Tenant keys are sealed and opened by the token
(AES-GCM, a random 96-bit nonce per wrap, the same AAD as a file KEK), and the audit trail's MAC
key is derived by the token (AES-CMAC in counter mode over fixed labels), so the stored formats
are those of a file KEK with another KEK id (``pkcs11:<label>``).

PKCS#11 calls block and a session is not thread-safe: `Pkcs11Token` keeps a pool of sessions,
one borrowed per call, and an executor with as many threads, so concurrent unwraps proceed in
parallel and never on the event loop. Calls on different sessions run at the same time inside
the module (python-pkcs11 releases the GIL around each one), so the module is initialised with
`CKF_OS_LOCKING_OK`: told nothing (python-pkcs11 passes NULL to `C_Initialize`), a module may
assume one thread at a time, and SoftHSM2 then turns its internal locks off. When the token
stops answering (unplugged, network HSM down, token removed) calls fail fast with
`KeyStoreUnavailable`; the next call after a pause reconnects (re-initialising the library once
no call is inside it), so the service recovers without a restart.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import hmac
import logging
import os
import queue
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any, TypeVar

from ..crypto import CryptoError, Kek
from ..documentation import page
from ..errors import KeyStoreUnavailable
from ..settings import ConfigError

log = logging.getLogger("vaultgraph.keys")

T = TypeVar("T")
PREFIX = "pkcs11:"
_AUDIT_KDF_LABEL = b"vaultgraph:audit-mac:v1"
_UNWRAP_FAILED = "tenant key material could not be unwrapped"
_NOT_IN_TOKEN = "tenant key is wrapped by a key-encryption key not in the key ring"
RECONNECT_PAUSE = 1.0  # seconds between two reconnection attempts while the token is away
DRAIN_WAIT = 10.0  # seconds a reconnection waits for the calls inside the module to return
# Seconds before each further attempt when the token is away at start-up (`TokenAway`):
# SoftHSM2's file store skips a token, or fails a login, while another process (a second
# worker) writes the token's file at that instant; a real HSM may be coming up.
CONNECT_PAUSES = (0.1, 0.2, 0.4, 0.8)

# PKCS#11 return values and the flag this module uses (pkcs11t.h).
CKR_OK = 0x0
CKR_CANT_LOCK = 0x0A
CKR_CRYPTOKI_NOT_INITIALIZED = 0x190
CKF_OS_LOCKING_OK = 0x2


class TokenError(ConfigError):
    """The token cannot be used as configured (module, token label, PIN, key): one line, no
    secret. Raised at start-up and by `keys rotate`."""

    def __init__(self, cause: str,
                 fix: str = "check VAULTGRAPH_PKCS11_MODULE, VAULTGRAPH_PKCS11_TOKEN_LABEL, "
                            "VAULTGRAPH_PKCS11_PIN_FILE and VAULTGRAPH_PKCS11_KEY_LABEL "
                            f"({page('key-custody.md')})"):
        super().__init__(cause, fix)


class TokenAway(TokenError):
    """The token is not found, does not answer, opens no session or fails a login with a
    device error, now: connecting at start-up tries again (`CONNECT_PAUSES`), listing the
    tokens afresh first when `rescan`. A login is tried again only after a device error
    (`_login_again`): a refused PIN counts toward the lock-out, and so may an answer this
    module does not know."""

    def __init__(self, cause: str, *, rescan: bool = False) -> None:
        super().__init__(cause)
        self.rescan = rescan


class _InitArgs(ctypes.Structure):
    """CK_C_INITIALIZE_ARGS: no mutex callbacks, and a flag saying the module may use the
    operating system's locks (it is called from several threads at once)."""

    _fields_ = [("CreateMutex", ctypes.c_void_p), ("DestroyMutex", ctypes.c_void_p),
                ("LockMutex", ctypes.c_void_p), ("UnlockMutex", ctypes.c_void_p),
                ("flags", ctypes.c_ulong), ("pReserved", ctypes.c_void_p)]


_CK_ENTRY = ctypes.CFUNCTYPE(ctypes.c_ulong, ctypes.c_void_p)


class _FunctionListHead(ctypes.Structure):
    """The start of CK_FUNCTION_LIST: the version, then C_Initialize and C_Finalize (natural
    alignment: PKCS#11 packs its structures only on Windows, where vaultgraph does not run)."""

    _fields_ = [("major", ctypes.c_ubyte), ("minor", ctypes.c_ubyte),
                ("C_Initialize", _CK_ENTRY), ("C_Finalize", _CK_ENTRY)]


def _login_again() -> tuple[type, ...]:
    """The login failures tried again at start-up: the device's, never an answer about the
    PIN or one this module does not know (SoftHSM2 fails a login with CKR_GENERAL_ERROR while
    another process rewrites the token's file)."""
    from pkcs11 import exceptions as e

    return (e.GeneralError, e.DeviceError, e.DeviceMemory, e.FunctionFailed, e.TokenNotPresent,
            e.DeviceRemoved, e.TokenNotRecognised, e.SessionHandleInvalid, e.SessionClosed)


def _pkcs11(needed_by: str = "the PKCS#11 token"):
    """The python-pkcs11 package; `TokenError` naming what needs it (the setting that made
    this process reach a token) when it is not installed."""
    try:
        import pkcs11
    except ImportError:
        raise TokenError(f"{needed_by} needs python-pkcs11",
                         "install vaultgraph[pkcs11]") from None
    return pkcs11


def require_library(needed_by: str) -> None:
    """Fail now, naming `needed_by`, when python-pkcs11 is not installed."""
    _pkcs11(needed_by)


class _Library:
    """A PKCS#11 module as this process holds it: initialised once, and logged in once per
    token. Login is per application, not per session, so the login session is kept here for
    the process's life: closing a pool never logs out another pool of the same token (two
    services in one process, the CLI's check beside a service). Re-initialising (after a token
    was lost) invalidates every session of the module: it happens once per loss, whichever pool
    notices first, once no call of any pool is inside the module, and the others reopen under
    the new initialisation.

    python-pkcs11 initialises the module with `C_Initialize(NULL)`, which tells it that the
    application never calls it from two threads at once, yet releases the GIL around every call:
    SoftHSM2 so initialised runs without its internal locks, and sessions used from several
    threads corrupt its heap (the process aborts). So the module is finalised and initialised
    again, here, with `CKF_OS_LOCKING_OK` (through its own function list, before any session
    exists). A module that cannot lock (`CKR_CANT_LOCK`) is initialised as before and every
    call into it is serialised (`calls`)."""

    _loaded: dict[str, _Library] = {}
    _guard = threading.Lock()

    def __init__(self, module: str, lib: Any) -> None:
        self.module = module
        self.lib = lib
        self.epoch = 1
        self.threaded = True  # the module locks for itself: calls may overlap
        self._logins: dict[str, tuple[Any, bytes]] = {}  # token label -> (session, PIN digest)
        self._lock = threading.Lock()
        self._inside = 0  # calls of every pool inside the module now
        self._calls = threading.Condition()
        self._one_at_a_time = threading.RLock()  # only when the module cannot lock
        self._entry = self._function_list()
        self._initialise()

    def _function_list(self) -> _FunctionListHead:
        """The module's C_Initialize and C_Finalize (the module python-pkcs11 loaded: loading
        the same file again returns the same copy)."""
        getter = ctypes.CDLL(self.module).C_GetFunctionList
        getter.restype = ctypes.c_ulong
        getter.argtypes = [ctypes.POINTER(ctypes.POINTER(_FunctionListHead))]
        head = ctypes.POINTER(_FunctionListHead)()
        if getter(ctypes.byref(head)) != CKR_OK or not head:
            raise TokenError(f"cannot initialise the PKCS#11 module {self.module} (no function "
                             "list)")
        return head.contents

    def _initialise(self) -> None:
        """Finalise the module (python-pkcs11 initialised it without threads, or it was lost)
        and initialise it for calls from several threads; `TokenError` when it refuses."""
        failed = TokenError(f"cannot initialise the PKCS#11 module {self.module}")
        if self._entry.C_Finalize(None) not in (CKR_OK, CKR_CRYPTOKI_NOT_INITIALIZED):
            raise failed
        args = _InitArgs(flags=CKF_OS_LOCKING_OK)
        answer = self._entry.C_Initialize(ctypes.byref(args))
        if answer == CKR_CANT_LOCK:
            log.warning("the PKCS#11 module cannot lock for several threads: its calls are "
                        "serialised", extra={"module": self.module})
            self.threaded = False
            answer = self._entry.C_Initialize(None)
        if answer != CKR_OK:
            raise failed

    @contextmanager
    def calls(self) -> Iterator[None]:
        """Around a borrowed session's use: counted, so that re-initialising waits for it, and
        alone in the module if the module cannot lock."""
        with self._calls:
            self._inside += 1
        try:
            with contextlib.nullcontext() if self.threaded else self._one_at_a_time:
                yield
        finally:
            with self._calls:
                self._inside -= 1
                self._calls.notify_all()

    @classmethod
    def get(cls, module: str) -> _Library:
        pkcs11 = _pkcs11()
        with cls._guard:
            found = cls._loaded.get(module)
            if found is None:
                try:
                    lib = pkcs11.lib(module)
                except (OSError, RuntimeError):
                    reason = "no such file" if not os.path.exists(module) else "it does not load"
                    raise TokenError(f"cannot load the PKCS#11 module {module} ({reason})") \
                        from None
                found = cls._loaded[module] = _Library(module, lib)
            return found

    def restart(self, seen: int) -> None:
        """Re-initialise the module unless another pool did since `seen`."""
        with self._calls:  # no call enters meanwhile
            if self.epoch != seen:
                return
            # Never finalise under a call (of any pool): C_Finalize frees what it uses.
            if not self._calls.wait_for(lambda: self._inside == 0, timeout=DRAIN_WAIT):
                raise TokenError(f"the PKCS#11 module {self.module} is still busy")
            self._logins.clear()  # C_Finalize ends every session and the login
            try:
                self._initialise()
            except TokenError as exc:  # an HSM coming up: the next attempt initialises
                raise TokenAway(exc.cause, rescan=True) from None
            self.epoch += 1

    def login(self, token: Any, token_label: str, pin: str) -> None:
        """Log in to the token once for the process; a second pool must know the same PIN.
        Called inside `calls`."""
        from pkcs11 import exceptions as e

        digest = hashlib.sha256(pin.encode()).digest()
        refused = TokenError(f"the PIN for the PKCS#11 token {token_label!r} is refused "
                             "(VAULTGRAPH_PKCS11_PIN_FILE)")
        with self._lock:
            held = self._logins.get(token_label)
            if held is not None:
                if not hmac.compare_digest(held[1], digest):
                    raise refused
                return
            try:
                session = token.open(user_pin=pin, rw=True)
            except e.UserAlreadyLoggedIn:  # logged in by other code of this process
                return
            except (e.PinIncorrect, e.PinInvalid, e.PinLenRange):
                raise refused from None
            except e.PinLocked:
                raise TokenError(f"the PKCS#11 token {token_label!r} is locked (too many "
                                 "wrong PINs)") from None
            except e.PKCS11Error as exc:
                cause = f"cannot log in to the PKCS#11 token {token_label!r} " \
                        f"({type(exc).__name__})"
                if isinstance(exc, _login_again()):
                    raise TokenAway(cause) from None
                raise TokenError(cause) from None
            self._logins[token_label] = (session, digest)


class _Pooled:
    """A session of the pool, the initialisation it was opened under, and the key objects
    found in it (a key object is a handle valid in its own session only)."""

    __slots__ = ("generation", "keys", "session")

    def __init__(self, generation: int, session: Any) -> None:
        self.generation = generation
        self.session = session
        self.keys: dict[str, Any] = {}  # label -> key object of this session


class Pkcs11Token:
    """One token, logged in once, with a pool of `sessions` sessions and as many threads."""

    def __init__(self, module: str, token_label: str, pin: str, *, sessions: int = 8) -> None:
        self.module = module
        self.token_label = token_label
        self._pin = pin
        self._size = max(1, sessions)
        self._pool: queue.Queue[_Pooled] = queue.Queue()
        self._known: set[str] = set()  # labels found at least once (the health probe's)
        self._generation = 0
        self._busy = 0
        self._broken = True
        self._last_attempt = 0.0
        self._state = threading.Condition()
        self._library: _Library | None = None
        self._epoch: int | None = None  # the library's initialisation this pool opened under
        self._sessions: list[_Pooled] = []
        self.executor = ThreadPoolExecutor(max_workers=self._size,
                                           thread_name_prefix="vaultgraph-pkcs11")

    def __repr__(self) -> str:
        return f"Pkcs11Token(token_label={self.token_label!r}, sessions={self._size})"

    @property
    def size(self) -> int:
        """Sessions in the pool (and threads in the executor)."""
        return self._size

    # -- connecting ----------------------------------------------------------------------

    def connect(self) -> None:
        """Load the module, find the token, log in, open the pool. `TokenError` (one line)
        when the module, token or PIN is wrong. A token away for the moment (`TokenAway`) is
        tried again after each of `CONNECT_PAUSES`, before its error is raised. Only a token
        not found or not answering re-initialises the module (which lists the tokens afresh):
        that ends every session of the module, other pools' too, and they reopen."""
        rescan = False
        with self._state:
            for pause in (*CONNECT_PAUSES, None):
                try:
                    self._connect(restart=rescan)
                    return
                except TokenAway as exc:
                    if pause is None:
                        raise
                    rescan = exc.rescan
                    log.info("PKCS#11 token not ready; trying again", extra={
                        "token": self.token_label, "error": exc.cause, "pause_s": pause})
                time.sleep(pause)

    def _connect(self, *, restart: bool = True) -> None:
        self._close_sessions()
        library = self._library = _Library.get(self.module)
        if restart and self._epoch is not None:
            # Reconnecting: a token that came back needs a new slot list.
            library.restart(self._epoch)
        self._epoch = library.epoch
        self._generation += 1
        with library.calls():
            self._open(library)
        self._broken = False

    def _open(self, library: _Library) -> None:
        from pkcs11 import exceptions as e

        try:
            token = library.lib.get_token(token_label=self.token_label)
        except e.NoSuchToken:
            raise TokenAway(f"no PKCS#11 token labelled {self.token_label!r} in "
                            f"{self.module}", rescan=True) from None
        except e.MultipleTokensReturned:
            raise TokenError(f"more than one PKCS#11 token labelled {self.token_label!r}") \
                from None
        except e.PKCS11Error as exc:
            raise TokenAway(f"the PKCS#11 token {self.token_label!r} does not answer "
                            f"({type(exc).__name__})", rescan=True) from None
        library.login(token, self.token_label, self._pin)
        # Login is per application: the pool's sessions share it, and closing them never logs
        # the process out (the login session stays with the library).
        try:
            for _ in range(self._size):
                self._sessions.append(_Pooled(self._generation, token.open(rw=True)))
        except e.PKCS11Error as exc:
            self._close_sessions(inside=True)
            raise TokenAway(f"the PKCS#11 token {self.token_label!r} opens no session "
                            f"({type(exc).__name__})") from None
        for label in list(self._known):  # the keys found before are there again
            try:
                self._find(self._sessions[0], label)
            except e.PKCS11Error:
                self._close_sessions(inside=True)
                raise TokenError(f"the key {label!r} is gone from the PKCS#11 token "
                                 f"{self.token_label!r}") from None
        for pooled in self._sessions:
            self._pool.put(pooled)

    def _close_sessions(self, *, inside: bool = False) -> None:
        while not self._pool.empty():
            self._pool.get_nowait()
        if self._sessions and self._library is not None:
            with contextlib.nullcontext() if inside else self._library.calls():
                for pooled in self._sessions:
                    with contextlib.suppress(Exception):  # a lost token's are gone already
                        pooled.session.close()
        self._sessions = []

    def close(self) -> None:
        self.executor.shutdown(wait=True)
        with self._state:
            self._close_sessions()
            self._broken = True

    # -- borrowing -----------------------------------------------------------------------

    @contextmanager
    def session(self) -> Iterator[Any]:
        """A session of the pool for one call (this thread only), reconnecting first when the
        token was lost and the pause since the last attempt is over."""
        with self._borrow() as pooled:
            yield pooled.session

    @contextmanager
    def _borrow(self) -> Iterator[_Pooled]:
        with self._state:
            if self._broken:
                self._reconnect()
            self._busy += 1
            library = self._library
        assert library is not None  # connected once (`_reconnect` raised otherwise)
        try:
            pooled = self._pool.get(timeout=30)
        except queue.Empty:
            self._release()
            raise KeyStoreUnavailable() from None
        try:
            with library.calls():
                yield pooled
        finally:
            if pooled.generation == self._generation:
                self._pool.put(pooled)
            self._release()

    def _release(self) -> None:
        with self._state:
            self._busy -= 1
            self._state.notify_all()

    def _reconnect(self) -> None:
        """Called with `_state` held. At most one attempt per `RECONNECT_PAUSE`; waits for the
        calls in flight (they fail fast on a lost token) before re-initialising the library."""
        now = time.monotonic()
        if now - self._last_attempt < RECONNECT_PAUSE:
            raise KeyStoreUnavailable()
        self._last_attempt = now
        # The calls in flight first (they fail fast on a lost token): closing sessions and
        # finalising the module under a call would free what it uses.
        if not self._state.wait_for(lambda: self._busy == 0, timeout=DRAIN_WAIT):
            raise KeyStoreUnavailable()
        try:
            self._connect()
        except Exception as exc:  # any failure: still away; said once a pause
            self._broken = True
            log.warning("PKCS#11 token still unavailable",
                        extra={"token": self.token_label, "error": type(exc).__name__})
            raise KeyStoreUnavailable() from None
        log.warning("PKCS#11 token reconnected", extra={"token": self.token_label})

    def _lost(self, error: str) -> None:
        with self._state:
            if not self._broken:
                log.warning("PKCS#11 token lost; requests needing it answer 503 until it "
                            "returns", extra={"token": self.token_label, "error": error})
            self._broken = True

    # -- keys ------------------------------------------------------------------------------

    def _find(self, pooled: _Pooled, label: str) -> Any:
        from pkcs11 import KeyType, ObjectClass

        cached = pooled.keys.get(label)
        if cached is not None:
            return cached
        key = pooled.session.get_key(object_class=ObjectClass.SECRET_KEY,
                                     key_type=KeyType.AES, label=label)
        pooled.keys[label] = key
        self._known.add(label)
        return key

    def call(self, label: str, work: Callable[[Any], T]) -> T:
        """`work(key)` with the key labelled `label`, on a borrowed session (blocking).
        A failure with the token healthy is `CryptoError` (the blob, or a key not in the token);
        a failure because the token is away is `KeyStoreUnavailable`."""
        from pkcs11 import exceptions as e

        with self._borrow() as pooled:
            for attempt in (1, 2):
                try:
                    return work(self._find(pooled, label))
                except e.PKCS11Error as exc:
                    if not self._healthy(pooled, label):
                        self._lost(type(exc).__name__)
                        raise KeyStoreUnavailable() from None
                    if isinstance(exc, e.NoSuchKey):
                        raise CryptoError(_NOT_IN_TOKEN) from None
                    if attempt == 1 and isinstance(exc, e.ObjectHandleInvalid | e.KeyHandleInvalid):
                        pooled.keys.pop(label, None)
                        continue  # a stale handle, the token healthy: find the key again
                    raise CryptoError(_UNWRAP_FAILED) from None
            raise AssertionError("unreachable")

    def _healthy(self, pooled: _Pooled, label: str) -> bool:
        """Whether the token still answers with the keys it had: SoftHSM and real HSMs alike
        report a failed GCM tag as a generic error, so the probe tells the two apart."""
        from pkcs11 import exceptions as e

        probes = [k for k in list(self._known) if k != label][:1] or [label]
        try:
            for probe in probes:
                pooled.keys.pop(probe, None)
                self._find(pooled, probe)
        except e.NoSuchKey:
            return probe == label and label not in self._known
        except e.PKCS11Error:
            return False
        return True

    def ensure_key(self, label: str, *, generate: bool = True) -> bool:
        """Find the AES-256 key `label`, or generate it inside the token (sensitive, never
        extractable) when `generate`. True if generated now. `TokenError` if the key found is
        not fit to be a KEK (extractable, not sensitive, not AES-256), or is absent and not to
        be generated."""
        from pkcs11 import Attribute, KeyType, ObjectClass
        from pkcs11 import exceptions as e

        with self.session() as session:
            try:
                key = session.get_key(object_class=ObjectClass.SECRET_KEY,
                                      key_type=KeyType.AES, label=label)
            except e.MultipleObjectsReturned:
                raise TokenError(f"more than one AES key labelled {label!r} in the PKCS#11 "
                                 f"token {self.token_label!r}") from None
            except e.NoSuchKey:
                if not generate:
                    raise TokenError(
                        f"no key labelled {label!r} in the PKCS#11 token {self.token_label!r}",
                        "check VAULTGRAPH_PKCS11_KEY_LABEL; only vaultgraph serve (at start-up) "
                        "and vaultgraph keys rotate create a key in the token "
                        f"({page('key-custody.md')})") from None
                session.generate_key(KeyType.AES, 256, label=label, store=True, template={
                    Attribute.TOKEN: True, Attribute.PRIVATE: True,
                    Attribute.SENSITIVE: True, Attribute.EXTRACTABLE: False,
                    Attribute.ENCRYPT: True, Attribute.DECRYPT: True, Attribute.SIGN: True,
                    Attribute.VERIFY: False, Attribute.WRAP: False, Attribute.UNWRAP: False,
                    Attribute.DERIVE: False,
                })
                self._known.add(label)
                return True
            except e.PKCS11Error as exc:
                raise TokenError(f"cannot search the PKCS#11 token {self.token_label!r} "
                                 f"({type(exc).__name__})") from None
            facts = self.describe_key(key)
            if not (facts["sensitive"] and not facts["extractable"] and facts["bits"] == 256):
                raise TokenError(f"the key {label!r} in the PKCS#11 token {self.token_label!r} "
                                 "is not a sensitive, non-extractable AES-256 key; refusing "
                                 "it as a key-encryption key")
            self._known.add(label)
            return False

    @staticmethod
    def describe_key(key: Any) -> dict[str, Any]:
        from pkcs11 import Attribute

        return {"label": key[Attribute.LABEL], "bits": key[Attribute.VALUE_LEN] * 8,
                "sensitive": bool(key[Attribute.SENSITIVE]),
                "extractable": bool(key[Attribute.EXTRACTABLE]),
                "always_sensitive": bool(key[Attribute.ALWAYS_SENSITIVE]),
                "never_extractable": bool(key[Attribute.NEVER_EXTRACTABLE])}

    def key_facts(self, label: str) -> dict[str, Any]:
        """The key's attributes (never its value): label, size, sensitivity, extractability."""
        return self.call(label, self.describe_key)

    def labels(self) -> list[str]:
        """Labels of the AES keys in the token."""
        from pkcs11 import Attribute, KeyType, ObjectClass

        with self.session() as session:
            found = session.get_objects({Attribute.CLASS: ObjectClass.SECRET_KEY,
                                         Attribute.KEY_TYPE: KeyType.AES})
            return sorted({obj[Attribute.LABEL] for obj in found})


class TokenKek(Kek):
    """The KEK labelled `label` in `token`, as a `Kek` of the ring (id ``pkcs11:<label>``)."""

    remote = True

    def __init__(self, token: Pkcs11Token, label: str) -> None:
        self.id = PREFIX + label
        self.label = label
        self._token = token

    def __repr__(self) -> str:
        return f"TokenKek({self.id!r})"

    def seal(self, plaintext: bytes, aad: bytes) -> bytes:
        from pkcs11 import Mechanism
        from pkcs11.mechanisms import GCMParams

        nonce = os.urandom(12)
        sealed = self._token.call(self.label, lambda key: key.encrypt(
            plaintext, mechanism=Mechanism.AES_GCM, mechanism_param=GCMParams(nonce, aad, 128)))
        return nonce + bytes(sealed)

    def open(self, sealed: bytes, aad: bytes) -> bytes:
        from pkcs11 import Mechanism
        from pkcs11.mechanisms import GCMParams

        if len(sealed) < 12 + 16:
            raise CryptoError(_UNWRAP_FAILED)
        nonce, body = sealed[:12], sealed[12:]
        return bytes(self._token.call(self.label, lambda key: key.decrypt(
            body, mechanism=Mechanism.AES_GCM, mechanism_param=GCMParams(nonce, aad, 128))))

    def audit_key(self) -> bytes:
        """32 bytes from AES-CMAC in counter mode (NIST SP 800-108) over a fixed label,
        computed by the token: a MAC key for the audit trail, never the KEK."""
        from pkcs11 import Mechanism

        def derive(key: Any) -> bytes:
            return b"".join(bytes(key.sign(bytes([i]) + _AUDIT_KDF_LABEL + b"\x00\x01\x00",
                                           mechanism=Mechanism.AES_CMAC)) for i in (1, 2))

        return self._token.call(self.label, derive)


def read_pin(path: str) -> str:
    """The user PIN from its file (first line); `TokenError` naming the file, never the PIN."""
    if not path:
        raise TokenError("VAULTGRAPH_PKCS11_PIN_FILE is not set (the token's user PIN, in a "
                         "0600 file)")
    try:
        with open(path) as f:
            pin = f.readline().strip()
    except OSError as exc:
        raise TokenError(f"cannot read VAULTGRAPH_PKCS11_PIN_FILE {path} "
                         f"({exc.strerror or type(exc).__name__})") from None
    if not pin:
        raise TokenError(f"VAULTGRAPH_PKCS11_PIN_FILE {path} is empty")
    return pin
