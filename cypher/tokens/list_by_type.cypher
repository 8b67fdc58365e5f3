// A page of tokens by type: per requested type (each once), a range seek on the
// (tenant_id, type, id) index read in index order and cut at the page size; the merge of those
// short runs is the page. A page reads at most `limit` tokens per type, however many exist.
// The hint keeps that index whatever the statistics say (the (tenant_id, id) index filtered by
// type reads every token of the tenant for a rare type).
// @visible/@live/@in_prefixes/@token: cypher/fragments/ (expanded when the catalog loads).
UNWIND $types AS wanted
CALL (wanted) {
  MATCH (t:Token) USING INDEX SEEK t:Token(tenant_id, type, id)
  WHERE t.tenant_id = $tenant_id AND t.type = wanted AND t.id > $after
    AND @visible(t)
  WITH t ORDER BY t.tenant_id, t.type, t.id
  LIMIT $limit
  RETURN t
}
WITH t ORDER BY t.id
LIMIT $limit
RETURN collect(@token(t)) AS tokens
