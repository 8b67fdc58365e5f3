"""The client's module docstring (what `help(vaultgraph.client)` shows) names every public
method, and both clients have the same ones: a method added to the client cannot leave the
docstring saying it does not exist (a reviewer found it claiming search, tokenize and the
audit logs were missing long after they shipped)."""

from __future__ import annotations

import re

import vaultgraph.client as client_package
from vaultgraph.client import AsyncClient, Client

# Lifecycle methods, not routes.
_NOT_ROUTES = {"close", "aclose"}


def _methods(cls: type) -> set[str]:
    return {name for name in vars(cls)
            if not name.startswith("_") and callable(getattr(cls, name))} - _NOT_ROUTES


def test_both_clients_have_the_same_methods():
    assert _methods(Client) == _methods(AsyncClient)


def test_the_package_docstring_names_every_method_and_claims_nothing_missing():
    doc = client_package.__doc__ or ""
    named = set(re.findall(r"\b[a-z_]+\b", doc))
    assert _methods(Client) <= named, sorted(_methods(Client) - named)
    assert "not in the service" not in doc
