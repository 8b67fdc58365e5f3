// Start-up key check: up to 20 tenants whose keys are wrapped under one of the given
// key-encryption keys; the service unwraps them to prove each KEK is the one they were wrapped with.
MATCH (t:Tenant)
WHERE any(version IN $versions WHERE t.wrapped_hmac_key STARTS WITH version + '.')
RETURN t.id AS tenant_id, t.dek_version AS dek_version, t.wrapped_deks AS wrapped_deks,
       t.wrapped_hmac_key AS wrapped_hmac_key
LIMIT 20
