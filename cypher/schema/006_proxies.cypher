// Outbound proxies: one per (tenant, id). Listing a tenant's proxies seeks (tenant_id,
// created_at) and reads them in cursor order.
CREATE CONSTRAINT proxy_tenant_id IF NOT EXISTS FOR (p:Proxy) REQUIRE (p.tenant_id, p.id) IS UNIQUE;
CREATE INDEX proxy_tenant_created IF NOT EXISTS FOR (p:Proxy) ON (p.tenant_id, p.created_at);
