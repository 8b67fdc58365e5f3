// Seek for `expires_at:[low TO high]`: a range seek in the token_tenant_expires_at index (schema/004_search);
// exclusive ends are checked after the seek.
MATCH (t:Token) USING INDEX SEEK t:Token(tenant_id, expires_at)
WHERE t.tenant_id = $tenant_id AND t.expires_at >= $low AND t.expires_at <= $high
  AND ($low_inclusive OR t.expires_at > $low) AND ($high_inclusive OR t.expires_at < $high)
RETURN t
