// @release_dedup_lock(node, param): the dedup lock of the fingerprint `param` (a variable: the
// value `node` held before the statement changed it) goes when neither `node` nor any other
// token holds that fingerprint any more: a deleted token keeps no fingerprint, and the lock
// (tenant, type, fingerprint) would keep it for ever otherwise. An unchanged fingerprint pays
// no seek. Used by tokens/delete, tokens/update, expiry/sweep and the retirement of an expired
// id holder in tokens/create and tokens/create_many, after their SET.
CALL ({node}, {param}) {
  WITH {node}, {param} WHERE {param} IS NOT NULL AND coalesce({node}.fingerprint <> {param}, true)
  MATCH (l:DedupLock {tenant_id: {node}.tenant_id, type: {node}.type, fingerprint: {param}})
  WHERE NOT EXISTS { MATCH (o:Token {tenant_id: {node}.tenant_id, type: {node}.type,
                                     fingerprint: {param}}) }
  DELETE l
}
