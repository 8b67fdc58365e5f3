// Compare and set a tenant's wrapped keys (KEK rotation): written only if they are still what the
// caller read, so a concurrent DEK rotation is never overwritten. No row: changed meanwhile.
MATCH (t:Tenant {id: $id})
WHERE t.dek_version = $old.dek_version AND t.wrapped_deks = $old.wrapped_deks
  AND t.wrapped_hmac_key = $old.wrapped_hmac_key
SET t += $new
RETURN t.id AS id
