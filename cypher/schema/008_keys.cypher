// Key rotation: one KeyRotationLock node, locked by the rotation that runs
// (cypher/tenants/kek_rotation_lock.cypher); unique, so two rotations never create two.
CREATE CONSTRAINT key_rotation_lock_id IF NOT EXISTS FOR (l:KeyRotationLock) REQUIRE l.id IS UNIQUE;
