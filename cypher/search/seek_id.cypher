// Seek for `id:X`: the (tenant_id, id) uniqueness constraint.
MATCH (t:Token {tenant_id: $tenant_id, id: $value}) USING INDEX SEEK t:Token(tenant_id, id)
RETURN t
