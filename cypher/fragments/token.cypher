// @token(node): a token's properties as the repository reads them (tokens/stored.py), with its
// times as ISO 8601 text. Returned as temporal values, each becomes a neo4j.time.DateTime the
// driver builds in Python (with a time-zone conversion) before it is converted again to a
// datetime: most of the driver's cost of reading a page of tokens. The text is parsed in C.
{node} {.*, created_at: toString({node}.created_at), modified_at: toString({node}.modified_at), expires_at: toString({node}.expires_at)}
