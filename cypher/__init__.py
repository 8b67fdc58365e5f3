"""The Cypher catalog, shipped inside the package as `vaultgraph.cypher` (pyproject.toml)."""
