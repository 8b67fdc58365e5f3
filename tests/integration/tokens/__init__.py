"""Token tests (issue #4), one module per area of the interface (spec §2 to §4.5)."""
