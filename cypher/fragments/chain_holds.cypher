// @chain_holds(chain): an event of any kind stands in the chain (an :AuditChain node), as
// verification reads it: a seek on (chain, seq) for each form an event may hold the chain's id
// in, its text and its integer (audit/ids.py chain_forms). The loop variable carries a
// trailing underscore so it never shadows a statement's own.
EXISTS {
  MATCH (e_:AuditEvent) USING INDEX e_:AuditEvent(chain, seq)
  WHERE e_.chain IN [{node}.id, toInteger({node}.id)] AND e_.seq IS NOT NULL
}
