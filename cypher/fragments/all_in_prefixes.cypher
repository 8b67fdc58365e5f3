// @all_in_prefixes(node[, param]): every one of the node's containers lies under one of the
// caller's readable prefixes ($prefixes, or the named parameter): a webhook its caller could
// have created (services/webhooks.py `within`, the same rule on a request's containers).
all(container_ IN {node}.containers WHERE any(prefix_ IN ${param} WHERE container_ STARTS WITH prefix_))
