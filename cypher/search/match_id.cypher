// Check for `id:X` on a candidate `t` of search/frame.
t.id = $value
