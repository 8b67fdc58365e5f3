// Create many tokens in one statement (POST /tokenize): one $rows entry per valid item, each
// {index, id, props, expires_at, meta_kvs, dedup, index_digests}, created by @create_row as
// tokens/create creates one token; an id held by a live token answers `taken` on its row
// instead of failing the statement (the other items still commit); a create racing this one
// for the same id can still fail it on the uniqueness constraint, and the repository runs it
// again (the winner then reads as `taken`).
// @create_row/@token: cypher/fragments/ (expanded when the catalog loads).
// Inside a request it is sent with the audit prefix in front (repository/audit_prefix.py;
// docs/architecture.md, "The audit prefix").
UNWIND $rows AS row
@create_row(row)
RETURN row.index AS index, CASE WHEN t IS NULL THEN null ELSE @token(t) END AS token,
       deduplicated, taken
