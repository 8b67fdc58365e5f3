"""Search over tokens and their graph (`POST /tokens/search`): the query language (`query`) and
which of a query's terms drive it from an index (`plan`)."""

# The name bound into every blind-index HMAC of a `data` term: the value a token's search index
# expression produced, keyed with the tenant's HMAC key (crypto.TenantKeys.index_value), so the
# same plaintext searched for and stored meet as the same digest, and never as plaintext.
BLIND_INDEX = "search:data"
