// Several requests' creates in one statement (repository/coalesce.py): creates sent while
// earlier ones were still being written, each a $rows entry as tokens/create_many takes one
// (its own tenant's), with `parent_id` (null: none) and its request's audit event, signed at
// its place in a chain of write events ({audit_chain, audit_seq, audit, audit_at, audit_refs,
// audit_tenant_key}: its place, and the rest of repository/audit_form.py placed_parts;
// `audit_chain` null: no event, a write outside a request).
// A row under a parent is created as tokens/create creates a child: its parent must be live
// and readable ($parent_prefixes, which every row of the statement shares), is write-locked,
// and is checked again under the lock (reads under it see the committed state). A parent not
// found, or deleted, merged away or swept while the statement waited, gets no child: the row
// answers `orphan` and creates nothing. The rows come sorted by parent id, so two statements
// lock the parents they share in one order.
// Each row's token is created by @create_row: an id held by a live token answers `taken` on
// its row; a create racing this one for the same id can still fail the statement on the
// uniqueness constraint, and the rows are then written again. A child is linked under its
// parent. Then, in this same transaction, the row's event, unless its id was taken or its
// parent not found (its request ends in a 409 or a 404, whose event is written at its place
// as that request ends, as when a create alone is refused by the constraint): the change and
// its event commit or roll back together, as with the placed audit prefix
// (repository/audit_prefix.py). It is created with its place, which its label's uniqueness
// constraint is checked on, and then completed with its other fields (`audit` holds no
// place). Rows of several tenants may share the statement: each row reads and writes only its
// own tenant's nodes.
// @visible/@create_row/@token: cypher/fragments/ (expanded when the catalog loads).
UNWIND $rows AS row
OPTIONAL MATCH (p:Token {tenant_id: row.tenant_id, id: row.parent_id})
  WHERE @visible(p, parent_prefixes)
SET p._lock = true
REMOVE p._lock
WITH row, p, row.parent_id IS NOT NULL
     AND NOT coalesce(p:Token AND @visible(p, parent_prefixes), false) AS orphan
OPTIONAL CALL (row, orphan) {
  WITH row WHERE NOT orphan
  @create_row(row)
  RETURN t, deduplicated, taken
}
WITH row, p, orphan, t, coalesce(deduplicated, false) AS deduplicated,
     coalesce(taken, false) AS taken
FOREACH (_ IN CASE WHEN p IS NOT NULL AND NOT orphan AND t IS NOT NULL THEN [1] ELSE [] END |
  CREATE (p)-[:PARENT_OF {created_at: datetime()}]->(t))
WITH row, t, deduplicated, taken, orphan
CALL (row, taken, orphan) {
  WITH row WHERE row.audit_chain IS NOT NULL AND NOT taken AND NOT orphan
  CREATE (audit_event:AuditEvent:WriteAuditEvent {chain: row.audit_chain, seq: row.audit_seq})
  SET audit_event += row.audit, audit_event.at = row.audit_at
  FOREACH (ref IN row.audit_refs |
    CREATE (audit_event)-[:AUDIT_REF {tenant_key: row.audit_tenant_key, token_key: ref[0],
                                      token_rest: ref[1], at: audit_event.at}]->(audit_event))
}
RETURN row.index AS index, CASE WHEN t IS NULL THEN null ELSE @token(t) END AS token,
       deduplicated, taken, orphan
