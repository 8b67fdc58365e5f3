// Seek for `created_at:[low TO high]`: a range seek in the token_tenant_created_at index (schema/004_search);
// exclusive ends are checked after the seek.
MATCH (t:Token) USING INDEX SEEK t:Token(tenant_id, created_at)
WHERE t.tenant_id = $tenant_id AND t.created_at >= $low AND t.created_at <= $high
  AND ($low_inclusive OR t.created_at > $low) AND ($high_inclusive OR t.created_at < $high)
RETURN t
