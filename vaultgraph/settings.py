"""Settings, read once from `VAULTGRAPH_*` environment variables.

Every field is documented in README.md (a test keeps the two in step).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path

PREFIX = "VAULTGRAPH_"
PROJECT_ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Settings:
    host: str = "127.0.0.1"
    port: int = 8080
    home: str = ".vaultgraph"
    neo4j_uri: str = "neo4j://127.0.0.1:7687"
    neo4j_user: str = "neo4j"
    neo4j_password: str = ""
    neo4j_database: str = "neo4j"
    neo4j_pool_size: int = 100
    neo4j_bolt_port: int = 7687
    neo4j_http_port: int = 7474
    neo4j_heap: str = "512m"
    neo4j_pagecache: str = "256m"
    cypher_dir: str = str(PROJECT_ROOT / "cypher")
    kek: str = ""
    kek_file: str = ""
    log_level: str = "INFO"
    log_format: str = "json"
    max_body_bytes: int = 1_048_576
    max_data_bytes: int = 65_536
    max_metadata_entries: int = 50
    max_containers: int = 20
    max_search_indexes: int = 20
    page_size_default: int = 20
    page_size_max: int = 100
    auth_cache_ttl: float = 1.0
    expiry_sweep_interval: float = 60.0
    expiry_sweep_batch: int = 1000
    render_workers: int = 2
    render_budget: float = 0.5
    audit_retention_days: float = 400.0
    audit_prune_interval: float = 3600.0
    audit_batch_max: int = 256
    audit_batch_wait: float = 0.002
    bulk_max_items: int = 100
    idempotency_ttl: float = 86_400.0
    idempotency_lease: float = 60.0
    rate_limit: float = 200.0
    rate_burst: int = 400
    auth_failure_limit: int = 20
    auth_failure_window: float = 60.0

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
                values[f.name] = kind(raw)
            except ValueError as exc:
                raise ValueError(f"{PREFIX}{f.name.upper()} must be a {kind.__name__}") from exc
        values.update(overrides)
        return cls(**values)

    @property
    def home_path(self) -> Path:
        return Path(self.home)

    @property
    def kek_path(self) -> Path:
        return Path(self.kek_file) if self.kek_file else self.home_path / "kek"

    def resolved_neo4j_password(self) -> str:
        """The configured password, else the one the local launcher generated."""
        if self.neo4j_password:
            return self.neo4j_password
        local = self.home_path / "neo4j.password"
        if local.exists():
            return local.read_text().strip()
        raise ValueError("no Neo4j password: set VAULTGRAPH_NEO4J_PASSWORD")

    def resolved_kek(self) -> str:
        """The key-encryption key ring spec, from VAULTGRAPH_KEK or the KEK file."""
        if self.kek:
            return self.kek
        if self.kek_path.exists():
            return self.kek_path.read_text().strip()
        raise ValueError("no key-encryption key: set VAULTGRAPH_KEK or VAULTGRAPH_KEK_FILE")
