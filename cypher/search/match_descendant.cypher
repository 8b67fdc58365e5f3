// Check for `descendant:X` on a candidate `t` of search/frame: the same walk as
// search/seek_descendant reaches t.
EXISTS {
  MATCH (d:Token {tenant_id: $tenant_id, id: $value})
  WHERE @visible(d)
  MATCH (t) ((n:Token WHERE n.tenant_id = $tenant_id
      AND @visible(n))
      -[:PARENT_OF]->(:Token)){1,5} (d)
}
