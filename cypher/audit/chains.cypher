// Every chain a writer started, with its recorded head, its form (placed or not: audit/chain.py),
// whether it holds write events (and until when its writer gave numbers in it, and whether any
// event still stands in it: @chain_holds) and its pruning checkpoint, with the key version its
// signature is under (none on a checkpoint stored before checkpoints named it).
MATCH (c:AuditChain)
OPTIONAL MATCH (k:AuditCheckpoint {chain: c.id})
RETURN c.id AS chain, c.seq AS head, coalesce(c.placed = true, false) AS placed,
       coalesce(c.writes = true, false) AS writes, c.until AS until,
       CASE WHEN c.writes = true THEN @chain_holds(c) END AS holds,
       k.seq AS checkpoint_seq, k.mac AS checkpoint_mac, k.sig AS checkpoint_sig,
       k.key_version AS checkpoint_key_version
ORDER BY chain
