"""Token-level rules: type registry and request field validation."""
