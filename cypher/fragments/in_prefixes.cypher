// @in_prefixes(node[, param]): one of the token's containers lies under one of the caller's
// readable prefixes ($prefixes, or the named parameter). The loop variables carry a trailing
// underscore so they never shadow a statement's own variables.
any(container_ IN {node}.containers WHERE any(prefix_ IN ${param} WHERE container_ STARTS WITH prefix_))
