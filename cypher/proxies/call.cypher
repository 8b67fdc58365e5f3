// A call's proxy and, in the same read, the tokens its body and headers seem to name: one
// round trip before the destination is called. Another tenant's proxy reads as absent (no row).
// $ids are the ids the call's text holds where an expression would start, at most the
// call's limit of expressions; the service uses these tokens only when they cover every
// expression it finds once the body is parsed, and reads the rest itself otherwise.
// @visible/@token: cypher/fragments/ (expanded when the catalog loads).
MATCH (p:Proxy {tenant_id: $tenant_id, id: $id})
CALL () {
  UNWIND $ids AS wanted
  MATCH (t:Token {tenant_id: $tenant_id, id: wanted})
  WHERE @visible(t)
  RETURN collect(@token(t)) AS tokens
}
// Only what a call needs of its proxy: its times would cost the driver a temporal value
// each, built in Python, that the call never reads.
RETURN p {.id, .destination_url, .header_allowlist} AS proxy, tokens
