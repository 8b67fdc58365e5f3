// Start-up key check: for each key-encryption key that wraps a stored tenant key, how many
// tenants it wraps. A blob is "<kek id>.<base64url>" (DEKs as "<dek version>:<blob>"), so the
// KEK id is the blob's text before its first "."; a KEK the ring lacks is named before serving.
MATCH (t:Tenant)
UNWIND [entry IN split(coalesce(t.wrapped_deks, ''), ',') |
          CASE WHEN entry CONTAINS ':' THEN substring(entry, size(split(entry, ':')[0]) + 1)
               ELSE '' END] + [coalesce(t.wrapped_hmac_key, '')] AS blob
WITH t, split(blob, '.')[0] AS kek
WHERE kek <> ''
RETURN kek, count(DISTINCT t) AS tenants
ORDER BY kek
