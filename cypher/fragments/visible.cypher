// @visible(node[, param]): the token is one the caller may see: live, and inside the caller's
// containers. Every statement that finds tokens for a caller says this, and only this, for it;
// the tenant is matched by the statement itself (it is part of every index seek).
@live({node}) AND @in_prefixes({node}, {param})
