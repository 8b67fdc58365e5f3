// Every chain a writer started, with its recorded head, its form (placed or not: audit/chain.py)
// and its pruning checkpoint.
MATCH (c:AuditChain)
OPTIONAL MATCH (k:AuditCheckpoint {chain: c.id})
RETURN c.id AS chain, c.seq AS head, coalesce(c.placed = true, false) AS placed,
       k.seq AS checkpoint_seq, k.mac AS checkpoint_mac, k.sig AS checkpoint_sig
ORDER BY chain
