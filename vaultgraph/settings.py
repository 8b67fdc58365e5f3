"""Settings, read once from `VAULTGRAPH_*` environment variables.

Every field is documented in docs/configuration.md (a test keeps the two in step).
"""

from __future__ import annotations

import ipaddress
import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from urllib.parse import urlsplit

PREFIX = "VAULTGRAPH_"
# Settings that take one of a few words: checked when the settings are made.
CHOICES = {"neo4j_read_routing": ("read", "write"), "event_loop": ("uvloop", "asyncio"),
           "log_format": ("json", "text"), "kek_provider": ("file", "pkcs11")}
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")  # any case
# Ports: 0 means "any free port" for the API and "no listener" for metrics; the local Neo4j's
# ports are real ports.
PORTS = {"port": 0, "metrics_port": 0, "neo4j_bolt_port": 1, "neo4j_http_port": 1}
# Numbers for which 0 means nothing (sizes, counts, a pool, a deadline, a retention): at least
# 1, or above 0. A retention of 0 days would delete every audit event at the next prune: it is
# refused, not read as "keep forever" (VAULTGRAPH_AUDIT_PRUNE_INTERVAL=0 stops the pruning).
POSITIVE = frozenset({
    "neo4j_pool_size", "max_body_bytes", "max_data_bytes", "page_size_default", "page_size_max",
    "search_max_query_length", "search_max_terms", "search_max_depth", "expiry_sweep_batch",
    "render_workers", "audit_batch_max", "audit_write_chains", "request_timeout",
    "neo4j_acquire_timeout", "neo4j_connect_timeout", "bulk_max_items", "idempotency_ttl",
    "idempotency_lease", "auth_failure_window", "proxy_max_in_flight", "pkcs11_sessions",
    "webhook_lease", "create_lanes", "create_batch_max", "get_lanes", "get_batch_max",
    "webhook_timeout", "webhook_disable_after", "webhook_max_in_flight",
    "webhook_endpoint_concurrency", "webhook_retention_days", "audit_retention_days"})
# Upper bounds the interface sets: an expired token is deleted within an hour of its expiry,
# so the sweep runs at least hourly (0 still turns this process's sweep off).
AT_MOST = {"expiry_sweep_interval": (
    3600, "set VAULTGRAPH_EXPIRY_SWEEP_INTERVAL to 3600 or less (expired tokens must be deleted "
          "within an hour), or 0 where another replica sweeps")}
# The driver's schemes (http and https, the driver's preview of the Query API, are not served).
NEO4J_SCHEMES = ("bolt", "bolt+s", "bolt+ssc", "neo4j", "neo4j+s", "neo4j+ssc")
# A memory size for the local server's JVM (-Xmx) and page cache: a number of bytes, or of
# kibibytes, mebibytes, gibibytes or tebibytes with k, m, g or t.
MEMORY_SIZE = re.compile(r"[1-9][0-9]*[kKmMgGtT]?")
# Settings that may not exceed another, and why: (the lower, the higher, the reason).
PAIRS = (
    ("neo4j_pool_warm", "neo4j_pool_size",
     "start-up opens that many connections in the pool before it is ready"),
    ("page_size_default", "page_size_max",
     "a page without ?size= is no longer than one with the largest"),
)
# The checkout's root, for tests and the benchmark only: an installed wheel has no checkout.
PROJECT_ROOT = Path(__file__).resolve().parent.parent


CGROUP_V2_CPU = Path("/sys/fs/cgroup/cpu.max")
CGROUP_V1_CPU = Path("/sys/fs/cgroup/cpu")


def available_cpus(v2: Path = CGROUP_V2_CPU, v1: Path = CGROUP_V1_CPU) -> int:
    """CPUs this process may run on: its affinity mask, capped by the CPU quota of its cgroup
    as a container sees it (cgroup v2 `cpu.max`, else v1 `cpu.cfs_quota_us`/`cfs_period_us`):
    a container limited to 1.5 CPUs gets 2 of a 16-core host's, not 16. A quota set only on a
    parent cgroup outside the container's view is not seen."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    cpus = cpus or 1
    quota = _cgroup_quota(v2, v1)
    return min(cpus, quota) if quota else cpus


def workers_beside_neo4j(cpus: int | None = None) -> int:
    """`--workers 0` when Neo4j runs on the same host (`serve --local-neo4j`, so `make run`):
    half the CPUs this process may use, at least one. There Neo4j spends about as much CPU a
    request as the service does, and a worker per CPU costs every request more CPU, in the
    service and in Neo4j, than it gains (docs/performance.md, "The default set-up")."""
    return max(1, (available_cpus() if cpus is None else cpus) // 2)


def _cgroup_quota(v2: Path, v1: Path) -> int | None:
    try:
        quota, period = v2.read_text().split()[:2]
        if quota == "max":
            return None
    except (OSError, ValueError):
        try:
            quota = (v1 / "cpu.cfs_quota_us").read_text().strip()
            period = (v1 / "cpu.cfs_period_us").read_text().strip()
        except OSError:
            return None
    try:
        q, p = int(quota), int(period)
    except ValueError:
        return None
    if q <= 0 or p <= 0:
        return None  # -1: no quota (v1)
    return max(1, -(-q // p))


_KINDS = {int: "a whole number", float: "a number", bool: "true or false"}  # a wrong type, named
_BOOLEANS = {"true": True, "1": True, "yes": True, "on": True,
             "false": False, "0": False, "no": False, "off": False}


def _boolean(raw: str) -> bool:
    try:
        return _BOOLEANS[raw.strip().lower()]
    except KeyError:
        raise ValueError(raw) from None


@dataclass(frozen=True)
class Settings:
    host: str = "127.0.0.1"
    port: int = 8080
    home: str = ""  # empty: $XDG_DATA_HOME/vaultgraph (~/.local/share/vaultgraph)
    neo4j_uri: str = ""  # empty: the local server, bolt://127.0.0.1:<neo4j_bolt_port>
    neo4j_user: str = "neo4j"
    neo4j_password: str = field(default="", repr=False)
    neo4j_database: str = "neo4j"
    neo4j_pool_size: int = 100
    neo4j_read_routing: str = "read"  # "read" | "write" (reads from the leader: docs/operations.md)
    neo4j_bolt_port: int = 7687
    neo4j_http_port: int = 7474
    neo4j_heap: str = "512m"
    neo4j_pagecache: str = "256m"
    cypher_dir: str = ""  # empty: the catalog shipped in the package (vaultgraph.cypher)
    kek: str = field(default="", repr=False)
    kek_file: str = ""
    # Key custody (docs/key-custody.md): "file" (the KEK above; development) or "pkcs11" (a
    # non-extractable key in a token; the file KEK, if still configured, only unwraps).
    kek_provider: str = "file"
    # A test database other vaults (throwaway key rings) write to as well: the key check skips
    # tenants under key-encryption keys this ring lacks instead of refusing to start.
    shared_database: bool = False
    pkcs11_module: str = ""  # the token's PKCS#11 library (.so)
    pkcs11_token_label: str = ""
    pkcs11_pin_file: str = ""  # the user PIN, first line of a 0600 file
    pkcs11_key_label: str = "vaultgraph-kek"
    pkcs11_sessions: int = 4  # sessions (and threads) in the pool that talks to the token
    log_level: str = "INFO"
    log_format: str = "json"
    max_body_bytes: int = 1_048_576
    max_data_bytes: int = 65_536
    max_metadata_entries: int = 50
    max_containers: int = 20
    max_search_indexes: int = 20
    page_size_default: int = 20
    page_size_max: int = 100
    search_max_query_length: int = 2000
    search_max_terms: int = 20
    search_max_depth: int = 6
    auth_cache_ttl: float = 1.0
    expiry_sweep_interval: float = 60.0
    expiry_sweep_batch: int = 1000
    render_workers: int = 2
    render_budget: float = 0.5
    audit_retention_days: float = 400.0
    audit_prune_interval: float = 3600.0
    audit_batch_max: int = 256
    audit_batch_wait: float = 0.01
    audit_lanes: int = 0  # 0: two for a single process, one per worker (audit_lane_count)
    audit_write_chains: int = 8
    audit_settle_wait: float = 0.25
    # Creates written together (repository/coalesce.py): writes of creates in flight at once,
    # and the most creates one statement writes for those that waited (1: each alone).
    create_lanes: int = 2
    create_batch_max: int = 10
    # Gets read together (repository/coalesce.py), likewise: reads of gets in flight at once,
    # and the most gets one statement reads for those that waited (1: each alone).
    get_lanes: int = 2
    get_batch_max: int = 16
    metrics_host: str = "127.0.0.1"
    metrics_port: int = 0
    metrics_dir: str = ""
    replica: str = ""  # the name metrics give this replica; empty: the host name
    request_timeout: float = 10.0
    neo4j_acquire_timeout: float = 2.0
    neo4j_connect_timeout: float = 2.0
    neo4j_pool_warm: int = 16
    header_read_timeout: float = 10.0
    body_read_timeout: float = 30.0
    keepalive_timeout: float = 75.0
    shutdown_grace: float = 25.0
    workers: int = 1  # 0: one per CPU this process may use (available_cpus)
    event_loop: str = "uvloop"
    gc_young_threshold: int = 20_000  # 0: Python's own (700); see server.tune_gc
    log_coalesce_interval: float = 10.0
    bulk_max_items: int = 100
    idempotency_ttl: float = 86_400.0
    idempotency_lease: float = 60.0
    rate_limit: float = 200.0
    rate_burst: int = 400
    auth_failure_limit: int = 20
    auth_failure_window: float = 60.0
    # Proxy calls one tenant may have waiting on their destinations at once, per process: the
    # outbound connections are shared, and a tenant with a slow destination must not take them
    # all (a call past it waits for a place within its time limit, then is a 429).
    proxy_max_in_flight: int = 64
    # The outbound address policy (vaultgraph/outbound), for webhooks and the proxy alike.
    webhook_allow_http: bool = False
    webhook_allowed_networks: str = ""  # comma-separated CIDRs exempt from the SSRF guard
    # Webhooks (docs/webhooks.md): waits in seconds between attempts after the first
    # (comma-separated; the Standard Webhooks schedule), a claim's lease, an attempt's deadline,
    # how long an endpoint may fail every delivery before it is disabled, how often the sender
    # looks for due deliveries (0: this process sends none), deliveries held per process and
    # attempts in flight per endpoint (an endpoint's rate is at most that many over its answer
    # time), and how long attempts stay listed.
    webhook_retry_schedule: str = "5,300,1800,7200,18000,36000,36000"
    webhook_lease: float = 60.0
    webhook_timeout: float = 10.0
    webhook_disable_after: float = 432_000.0
    webhook_poll_interval: float = 0.5
    webhook_max_in_flight: int = 256
    webhook_endpoint_concurrency: int = 16
    webhook_retention_days: float = 30.0

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides) -> Settings:
        env = os.environ if environ is None else environ
        values = {}
        for f in fields(cls):
            raw = env.get(PREFIX + f.name.upper())
            if raw is None or raw == "":
                continue
            kind = type(f.default)
            try:
                values[f.name] = _boolean(raw) if kind is bool else kind(raw)
            except ValueError:
                name = f"{PREFIX}{f.name.upper()}"
                what = _KINDS.get(kind, kind.__name__)
                raise ConfigError(f"{name} is not {what}",
                                  f"set {name} to {what} or unset it") from None
        values.update(overrides)
        # Absolute once, here: every command and every child process sees the same home,
        # whatever directory it runs in.
        values["home"] = str(default_home(env) if not values.get("home")
                             else Path(values["home"]).expanduser().absolute())
        return cls(**values)

    def __post_init__(self):
        if not self.neo4j_uri:  # the local server: one server, a direct connection (no routing)
            object.__setattr__(self, "neo4j_uri", f"bolt://127.0.0.1:{self.neo4j_bolt_port}")
        for name, choices in CHOICES.items():
            value = getattr(self, name)
            if value not in choices:
                setting = PREFIX + name.upper()
                raise ConfigError(f"{setting} is {value!r}",
                                  f"set {setting} to {' or '.join(choices)}")
        if str(self.log_level).upper() not in LOG_LEVELS:
            raise ConfigError(f"VAULTGRAPH_LOG_LEVEL is {self.log_level!r}",
                              f"set VAULTGRAPH_LOG_LEVEL to {', '.join(LOG_LEVELS[:-1])} or "
                              f"{LOG_LEVELS[-1]}")
        self._check_numbers()
        self._check_pairs()
        if not re.fullmatch(r"[A-Za-z0-9_-]{1,32}", self.pkcs11_key_label):
            raise ConfigError(f"VAULTGRAPH_PKCS11_KEY_LABEL is {self.pkcs11_key_label!r}",
                              "set VAULTGRAPH_PKCS11_KEY_LABEL to 1-32 letters, digits, '-' "
                              "or '_' (it is part of every wrapped key's name)")
        self._check_cypher_dir()
        self._check_neo4j()
        self._check_networks()
        if self.idempotency_lease < self.request_timeout:
            # A claim must outlive its request's database work, or a retry takes the key over
            # while the first write still runs and both write.
            raise ConfigError(
                f"VAULTGRAPH_IDEMPOTENCY_LEASE ({self.idempotency_lease:g}) is shorter than "
                f"VAULTGRAPH_REQUEST_TIMEOUT ({self.request_timeout:g})",
                "set VAULTGRAPH_IDEMPOTENCY_LEASE to at least VAULTGRAPH_REQUEST_TIMEOUT (best: "
                "above Neo4j's transaction timeout, 60 s by default)")
        self._check_webhooks()
        if self.idempotency_ttl < self.idempotency_lease:
            raise ConfigError(
                f"VAULTGRAPH_IDEMPOTENCY_TTL ({self.idempotency_ttl:g}) is shorter than "
                f"VAULTGRAPH_IDEMPOTENCY_LEASE ({self.idempotency_lease:g})",
                "set VAULTGRAPH_IDEMPOTENCY_TTL to at least VAULTGRAPH_IDEMPOTENCY_LEASE")

    def _check_cypher_dir(self) -> None:
        """Another catalog is a directory laid out as the package's (cypher/): a statement it
        lacks is named when it is first asked for."""
        if not self.cypher_dir:
            return
        setting = "VAULTGRAPH_CYPHER_DIR"
        fix = (f"point {setting} at a directory of .cypher files (the repository's cypher/), "
               "or unset it to use the catalog in the package")
        if not Path(self.cypher_dir).is_dir():
            raise ConfigError(f"{setting} is {self.cypher_dir!r}, not a directory", fix)
        if not any((Path(self.cypher_dir) / "schema").glob("*.cypher")):
            # /tmp, or a folder above the catalog: every statement would be missing.
            raise ConfigError(f"{setting} is {self.cypher_dir!r}, which holds no catalog (no "
                              "schema/*.cypher)", fix)

    def _check_neo4j(self) -> None:
        """A Bolt URI the driver can use, and memory sizes the local server's JVM reads."""
        setting = "VAULTGRAPH_NEO4J_URI"
        fix = (f"set {setting} to bolt://HOST:PORT (one server) or neo4j://HOST:PORT (a "
               "cluster; +s for TLS, as in neo4j+s://), or unset it for the local server")
        try:
            parts = urlsplit(self.neo4j_uri)
            parts.port  # noqa: B018 - a port out of range or not a number raises here
        except ValueError:
            raise ConfigError(f"{setting} is not a URI the driver can read", fix) from None
        if parts.scheme not in NEO4J_SCHEMES:
            what = f"the scheme {parts.scheme!r}" if parts.scheme else "no scheme"
            raise ConfigError(f"{setting} has {what}, not a Bolt one", fix)
        if not parts.hostname:
            raise ConfigError(f"{setting} names no host", fix)
        for name in ("neo4j_heap", "neo4j_pagecache"):
            if not MEMORY_SIZE.fullmatch(getattr(self, name)):
                setting = PREFIX + name.upper()
                raise ConfigError(f"{setting} is {getattr(self, name)!r}, not a memory size",
                                  f"set {setting} to a number with k, m or g after it, such "
                                  "as 512m or 2g")

    def _check_pairs(self) -> None:
        """Settings bounded by another: each refusal names both."""
        for low, high, why in PAIRS:
            if getattr(self, low) > getattr(self, high):
                low_name, high_name = PREFIX + low.upper(), PREFIX + high.upper()
                raise ConfigError(
                    f"{low_name} ({getattr(self, low):g}) is above {high_name} "
                    f"({getattr(self, high):g})",
                    f"set {low_name} to at most {high_name} ({why})")

    def _check_webhooks(self) -> None:
        setting = "VAULTGRAPH_WEBHOOK_RETRY_SCHEDULE"
        try:
            schedule = self.webhook_retry_schedule_seconds
        except ValueError:
            raise ConfigError(f"{setting} is not a list of seconds",
                              f"set {setting} to comma-separated numbers of 0 or more, such "
                              "as 5,300,1800") from None
        if any(not math.isfinite(s) or s < 0 for s in schedule):
            raise ConfigError(f"{setting} holds a wait below 0",
                              f"set {setting} to comma-separated numbers of 0 or more")
        if self.webhook_lease <= self.webhook_timeout:
            # A claim must outlive its attempt, or another worker sends the event meanwhile.
            raise ConfigError(
                f"VAULTGRAPH_WEBHOOK_LEASE ({self.webhook_lease:g}) is not longer than "
                f"VAULTGRAPH_WEBHOOK_TIMEOUT ({self.webhook_timeout:g})",
                "set VAULTGRAPH_WEBHOOK_LEASE above VAULTGRAPH_WEBHOOK_TIMEOUT")

    @property
    def webhook_retry_schedule_seconds(self) -> tuple[float, ...]:
        """The waits before each retry, from VAULTGRAPH_WEBHOOK_RETRY_SCHEDULE ("": no retry)."""
        return tuple(float(part) for part in self.webhook_retry_schedule.split(",")
                     if part.strip())

    def _check_networks(self) -> None:
        """The networks exempt from the outbound address policy: each a CIDR or an address."""
        setting = "VAULTGRAPH_WEBHOOK_ALLOWED_NETWORKS"
        for item in filter(None, (p.strip() for p in self.webhook_allowed_networks.split(","))):
            try:
                ipaddress.ip_network(item, strict=False)
            except ValueError:
                raise ConfigError(f"{setting} holds {item!r}, not a network",
                                  f"set {setting} to comma-separated CIDRs such as "
                                  "10.1.0.0/16,fd00::/8, or unset it") from None

    def _check_numbers(self) -> None:
        """Ports within range; no number negative, NaN or infinite; sizes and deadlines above 0
        (each refusal names the setting, as a value of the wrong type is named)."""
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool) or not isinstance(value, int | float):
                continue
            setting = PREFIX + f.name.upper()
            if f.name in PORTS:
                low = PORTS[f.name]
                if not low <= value <= 65535:
                    raise ConfigError(f"{setting} is {value}, not a port",
                                      f"set {setting} to a port from {low} to 65535")
            elif not math.isfinite(value) or value < 0:
                raise ConfigError(f"{setting} is {value}", f"set {setting} to a number of 0 or "
                                  "more" if f.name not in POSITIVE else
                                  f"set {setting} to a number above 0")
            elif f.name in POSITIVE and value <= 0:
                raise ConfigError(f"{setting} is {value}",
                                  f"set {setting} to a number above 0")
            elif f.name in AT_MOST and value > AT_MOST[f.name][0]:
                raise ConfigError(f"{setting} is {value}", AT_MOST[f.name][1])

    @property
    def worker_count(self) -> int:
        """Processes `vaultgraph serve` runs: `workers`, or when it is 0 one per CPU."""
        return self.workers if self.workers > 0 else available_cpus()

    @property
    def audit_lane_count(self) -> int:
        """Audit chains each process writes: `audit_lanes`, or when it is 0 two for a single
        process (one lane's batch gathers while the other's commits) and one per worker when
        there are several, which already overlap each other's commits; more lanes would only
        split the same events into smaller batches (docs/audit.md, "Cost and growth")."""
        if self.audit_lanes > 0:
            return self.audit_lanes
        return 2 if self.worker_count <= 1 else 1

    @property
    def home_path(self) -> Path:
        return Path(self.home) if self.home else default_home(os.environ)

    def local_neo4j_home(self, bolt_port: int | None = None) -> Path:
        """The home of the local server on this Bolt port (the launcher's layout)."""
        port = self.neo4j_bolt_port if bolt_port is None else bolt_port
        return self.home_path / ("neo4j" if port == 7687 else f"neo4j-{port}")

    def local_password_file(self) -> Path | None:
        """The password file the launcher wrote for the server the URI names (None: the URI
        is not a server on this machine)."""
        parts = urlsplit(self.neo4j_uri)
        if parts.hostname not in ("127.0.0.1", "localhost", "::1"):
            return None
        home = self.local_neo4j_home(parts.port or 7687)
        return home.parent / f"{home.name}.password"

    @property
    def kek_path(self) -> Path:
        return Path(self.kek_file) if self.kek_file else self.home_path / "kek"

    def resolved_neo4j_password(self) -> str:
        """The configured password, else the one the local launcher generated."""
        if self.neo4j_password:
            return self.neo4j_password
        local = self.local_password_file()
        if local is not None and local.exists():
            return local.read_text().strip()
        where = f" and no password file {local}" if local else ""
        raise ConfigError(
            f"no Neo4j password for {self.neo4j_uri}: VAULTGRAPH_NEO4J_PASSWORD is not set{where}",
            "set VAULTGRAPH_HOME to the home the local server was started with, or set "
            "VAULTGRAPH_NEO4J_PASSWORD")

    def resolved_kek(self) -> str:
        """The key-encryption key ring spec, from VAULTGRAPH_KEK or the KEK file."""
        if self.kek:
            return self.kek
        if self.kek_path.exists():
            return self.kek_path.read_text().strip()
        raise ConfigError(f"no key-encryption key: VAULTGRAPH_KEK is not set and {self.kek_path} "
                          "does not exist",
                          "set VAULTGRAPH_KEK or VAULTGRAPH_KEK_FILE, or VAULTGRAPH_HOME to the "
                          "home that holds the key")

    @property
    def kek_source(self) -> str:
        return "VAULTGRAPH_KEK" if self.kek else str(self.kek_path)


class ConfigError(ValueError):
    """A setting that stops a command: `cause` and `fix` are one line each, never a secret."""

    def __init__(self, cause: str, fix: str):
        super().__init__(f"{cause}: {fix}")
        self.cause = cause
        self.fix = fix


def default_home(env: Mapping[str, str]) -> Path:
    data = env.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(data).expanduser().absolute() / "vaultgraph"
