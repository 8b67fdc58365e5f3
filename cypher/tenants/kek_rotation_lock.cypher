// The lock that lets one `vaultgraph keys rotate` run at a time against this database
// (repository/key_rotation.py). Its transaction stays open, with no timeout, for the whole
// rotation and is then rolled back: the write lock the SET takes on the one KeyRotationLock node
// is held until then, and a second rotation's statement waits on it. The unique constraint
// (schema/008_keys.cypher) makes two first rotations wait on each other too, before the node
// exists. A rotation that dies loses its connection, its transaction is rolled back, and the
// lock is free.
MERGE (l:KeyRotationLock {id: 'kek'})
SET l.taken_at = datetime()
RETURN l.id AS id
