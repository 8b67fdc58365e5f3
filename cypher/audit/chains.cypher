// Every chain a writer started, with its recorded head, its form (placed or not: audit/chain.py),
// whether it holds write events (and until when its writer gave numbers in it) and its pruning
// checkpoint.
MATCH (c:AuditChain)
OPTIONAL MATCH (k:AuditCheckpoint {chain: c.id})
RETURN c.id AS chain, c.seq AS head, coalesce(c.placed = true, false) AS placed,
       coalesce(c.writes = true, false) AS writes, c.until AS until,
       k.seq AS checkpoint_seq, k.mac AS checkpoint_mac, k.sig AS checkpoint_sig
ORDER BY chain
