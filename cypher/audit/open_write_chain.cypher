// A chain of write events, made by a writer before it gives any of its numbers (services/
// audit_writer.py): unique by id (a colliding id is refused, and the writer draws another),
// placed (each event signed at its place), marked `writes` (its numbers may have holes: the
// blocks in the lanes' chains say which events stand, audit/chain.py) and `until`, the time
// (microseconds since 1970) from which the writer gives none of its numbers.
CREATE (c:AuditChain {id: $chain, placed: true, writes: true, until: $until})
SET c.updated_at = datetime()
