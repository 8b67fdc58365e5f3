// Check for `type:X` on a candidate `t` of search/frame.
t.type = $value
