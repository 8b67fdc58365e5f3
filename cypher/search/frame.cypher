// The search statement (services/search.py): the only composed statement. {{seeks}} becomes the
// seek fragments chosen by the query's tree (search/seek_*, joined by search/union), each
// returning candidate tokens `t` from an index; {{check}} becomes the rest of the query as a
// predicate (search/match_*, search/and|or|not). Values are only ever $parameters.
// A candidate is kept when it is the caller's (tenant, live, containers under $prefixes), lies
// after the cursor ($after_at, $after_id: the last token of the previous page), and passes the
// check; the page is the newest $limit of those (created_at, then id, descending).
// @visible/@token: cypher/fragments/ (expanded when the catalog loads).
CALL () {
{{seeks}}
}
WITH DISTINCT t
WHERE t.tenant_id = $tenant_id
  AND @visible(t)
  AND ($after_id IS NULL OR t.created_at < datetime($after_at)
       OR (t.created_at = datetime($after_at) AND t.id < $after_id))
  AND {{check}}
WITH t ORDER BY t.created_at DESC, t.id DESC
LIMIT $limit
RETURN collect(@token(t)) AS tokens
