"""Token tests (issue #4), one module per area: the token object, validation, expiry, and
create, list, get, update and delete."""
