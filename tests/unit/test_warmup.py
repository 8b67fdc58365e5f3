"""The start-up warm-up (repository/warmup.py) knows a type for every parameter the catalog's
statements use, so each is planned with the types the service sends."""

from __future__ import annotations

from vaultgraph.catalog import Catalog
from vaultgraph.repository.audit_prefix import audited_text
from vaultgraph.repository.warmup import (
    NOT_HERE,
    OVERRIDES,
    SAMPLES,
    parameters,
    sample_parameters,
)


def test_every_parameter_of_every_statement_has_a_sample():
    catalog = Catalog.load()
    missing = {(name, p) for name in catalog.names() if not name.startswith(NOT_HERE)
               for p in parameters(catalog.text(name))
               if p not in SAMPLES and p not in OVERRIDES.get(name, {})}
    assert missing == set()


def test_overrides_name_statements_and_parameters_that_exist():
    catalog = Catalog.load()
    for name, own in OVERRIDES.items():
        assert set(own) <= set(parameters(catalog.text(name))), name


def test_the_audited_form_samples_the_prefix_s_parameters_too():
    catalog = Catalog.load()
    params = sample_parameters("tokens/create", audited_text(catalog.text("tokens/create")))
    assert params["parent_id"] is None  # the statement's own override
    assert params["audit"] == {} and params["idem_key"] is None
    assert parameters("// $not_this\nRETURN $this") == ["this"]
