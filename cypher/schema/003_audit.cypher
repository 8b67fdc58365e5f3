// The audit trail: events are nodes of their own, never linked to tokens (an edge onto a hot
// token node would serialise its reads). Every filter of GET /logs is a seek on one of these,
// read newest first in index order; "all events of token X" is a seek on (tenant_key,
// token_key, at) for events naming that token alone, and on the AUDIT_REF self-loops' (one per
// token, with the same two keys) for events naming several.
// An event's id is unique among those a write stored and the writer has yet to link (label
// :PendingAuditEvent, which linking removes): linking finds one by id, and a write's transaction
// run a second time is refused. Linked events are found by (chain, seq) and pruned so, or by
// time; a unique index on every event's id (74 bytes of store an event) is dropped if an
// earlier version made it (docs/adr/0024).
DROP CONSTRAINT audit_event_id IF EXISTS;
CREATE CONSTRAINT audit_pending_event_id IF NOT EXISTS
  FOR (e:PendingAuditEvent) REQUIRE e.id IS UNIQUE;
// Events hold the tenant's, the application's and the token's ids as integers (a UUID as two,
// repository/audit.py stored_form, audit/ids.py): these indexes hold the first, 10 bytes of key
// where the text took 39, and a seek checks the rest per event (docs/adr/0026). A page of every
// event of a tenant is a seek on (tenant_key, outcome, at) per outcome: no (tenant_key, at)
// (dropped where an earlier build of this change made it).
DROP INDEX audit_tenant_key_at IF EXISTS;
CREATE INDEX audit_tenant_key_application_at IF NOT EXISTS
  FOR (e:AuditEvent) ON (e.tenant_key, e.application_key, e.at);
CREATE INDEX audit_tenant_key_operation_at IF NOT EXISTS
  FOR (e:AuditEvent) ON (e.tenant_key, e.operation, e.at);
CREATE INDEX audit_tenant_key_outcome_at IF NOT EXISTS
  FOR (e:AuditEvent) ON (e.tenant_key, e.outcome, e.at);
CREATE INDEX audit_tenant_key_token_at IF NOT EXISTS
  FOR (e:AuditEvent) ON (e.tenant_key, e.token_key, e.at);
// The same on the ids' text: events stored before the integers (and the start-up rehearsal's,
// whose tenant id is no UUID) are found by these; an event holding its ids as integers only
// is in none of them.
CREATE INDEX audit_tenant_at IF NOT EXISTS FOR (e:AuditEvent) ON (e.tenant_id, e.at);
CREATE INDEX audit_tenant_application_at IF NOT EXISTS
  FOR (e:AuditEvent) ON (e.tenant_id, e.application_id, e.at);
CREATE INDEX audit_tenant_operation_at IF NOT EXISTS
  FOR (e:AuditEvent) ON (e.tenant_id, e.operation, e.at);
CREATE INDEX audit_tenant_outcome_at IF NOT EXISTS
  FOR (e:AuditEvent) ON (e.tenant_id, e.outcome, e.at);
CREATE INDEX audit_tenant_token_at IF NOT EXISTS
  FOR (e:AuditEvent) ON (e.tenant_id, e.token_id, e.at);
CREATE INDEX audit_ref_key_at IF NOT EXISTS
  FOR ()-[r:AUDIT_REF]-() ON (r.tenant_key, r.token_key, r.at);
// AUDIT_REFs stored before they held the keys hold both ids as text; this index holds only
// them.
CREATE INDEX audit_ref IF NOT EXISTS
  FOR ()-[r:AUDIT_REF]-() ON (r.tenant_id, r.token_id, r.at);
// Verification walks each chain in sequence order; export and pruning go by time.
CREATE INDEX audit_chain_seq IF NOT EXISTS FOR (e:AuditEvent) ON (e.chain, e.seq);
CREATE INDEX audit_at IF NOT EXISTS FOR (e:AuditEvent) ON (e.at);
CREATE CONSTRAINT audit_chain_id IF NOT EXISTS FOR (c:AuditChain) REQUIRE c.id IS UNIQUE;
// A write event (a create's, stored complete by its write's own statement at a number of its
// process's chain of write events) is unique by its place: a write's transaction run a second
// time is refused, and a batch writing an event at the place of a write still running waits
// for it (services/audit_writer.py). The blocks that settle write events are found by the
// chain they settle (verification of one chain, pruning).
CREATE CONSTRAINT audit_write_event_place IF NOT EXISTS
  FOR (e:WriteAuditEvent) REQUIRE (e.chain, e.seq) IS UNIQUE;
CREATE INDEX audit_block_settles IF NOT EXISTS FOR (b:AuditBlock) ON (b.settles);
CREATE CONSTRAINT audit_checkpoint_chain IF NOT EXISTS
  FOR (c:AuditCheckpoint) REQUIRE c.chain IS UNIQUE;
// One node whose lock serialises prunes (every replica may run one), so two prunes never both
// count an event only one of them deleted.
CREATE CONSTRAINT audit_prune_lock IF NOT EXISTS FOR (l:AuditPruneLock) REQUIRE l.id IS UNIQUE;
