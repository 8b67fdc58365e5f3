// The other `vaultgraph keys rotate` runs with a transaction open on this database, by the
// metadata their lock's transaction carries (repository/key_rotation.py): who a rotation that
// waits for the lock is waiting for. Read-only; Community lists every transaction to its user.
SHOW TRANSACTIONS YIELD transactionId, metaData
WHERE metaData.vaultgraph = 'keys rotate' AND metaData.by <> $by
RETURN collect(metaData.by) AS holders
