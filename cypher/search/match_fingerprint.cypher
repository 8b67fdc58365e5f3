// Check for `fingerprint:X` on a candidate `t` of search/frame.
coalesce(t.fingerprint = $value, false)
