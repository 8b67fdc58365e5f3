// Check for `container:/path/` on a candidate `t` of search/frame: one of its containers lies
// under the path (a prefix match, as access rules match containers). Never a seek: containers
// are a list property, which no index serves.
any(c IN t.containers WHERE c STARTS WITH $value)
