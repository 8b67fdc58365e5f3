// Tenants, applications and API keys. Every statement is idempotent; applied at start-up.
CREATE CONSTRAINT tenant_id IF NOT EXISTS FOR (t:Tenant) REQUIRE t.id IS UNIQUE;
CREATE CONSTRAINT application_tenant_id IF NOT EXISTS
  FOR (a:Application) REQUIRE (a.tenant_id, a.id) IS UNIQUE;
CREATE CONSTRAINT api_key_hash IF NOT EXISTS FOR (k:ApiKey) REQUIRE k.hash IS UNIQUE;
CREATE CONSTRAINT api_key_id IF NOT EXISTS FOR (k:ApiKey) REQUIRE k.id IS UNIQUE;
// Listing a tenant's applications seeks (tenant_id, created_at) and reads them in cursor order.
CREATE INDEX application_tenant_created IF NOT EXISTS
  FOR (a:Application) ON (a.tenant_id, a.created_at);
