// Seek for `type:X`: the token_tenant_type_id index.
MATCH (t:Token)
WHERE t.tenant_id = $tenant_id AND t.type = $value
RETURN t
