// A proxy is removed for good: its calls' audit events keep its id.
MATCH (p:Proxy {tenant_id: $tenant_id, id: $id})
DELETE p
RETURN $id AS id
