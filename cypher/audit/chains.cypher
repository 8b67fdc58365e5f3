// Every chain a writer started, with its recorded head and pruning checkpoint.
MATCH (c:AuditChain)
OPTIONAL MATCH (k:AuditCheckpoint {chain: c.id})
RETURN c.id AS chain, c.seq AS head, k.seq AS checkpoint_seq, k.mac AS checkpoint_mac,
       k.sig AS checkpoint_sig
ORDER BY chain
