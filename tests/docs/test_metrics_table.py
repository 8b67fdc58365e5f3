"""docs/observability.md's metrics table names every metric `vaultgraph/metrics.py` defines,
with its type, and no other: a metric added, renamed or removed without its row fails here."""

from __future__ import annotations

import re
from pathlib import Path

from prometheus_client.metrics import MetricWrapperBase

from vaultgraph import metrics

PAGE = Path(__file__).resolve().parents[2] / "docs" / "observability.md"
_ROW = re.compile(r"^\| (`vaultgraph_[^|]+) \| (\w+) \|", re.M)


def documented() -> dict[str, str]:
    table: dict[str, str] = {}
    for names, kind in _ROW.findall(PAGE.read_text()):
        for name in re.findall(r"`(vaultgraph_\w+)`", names):
            assert name not in table, f"{name} has two rows"
            table[name] = kind
    return table


def defined() -> dict[str, str]:
    found = {}
    for metric in vars(metrics).values():
        if isinstance(metric, MetricWrapperBase):
            kind = type(metric).__name__.lower()
            # what a scrape shows: prometheus-client names a counter's samples `<name>_total`
            found[metric._name + ("_total" if kind == "counter" else "")] = kind
    return found


def test_every_metric_has_its_row_with_its_type():
    assert len(defined()) >= 20
    assert documented() == defined()
