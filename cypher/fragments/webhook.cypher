// @webhook(node): a webhook as the repository reads it: never its secrets; times as text.
{node} {.id, .tenant_id, .url, .events, .containers, .description, .status, .disabled_reason, .created_by, created_at: toString({node}.created_at), modified_at: toString({node}.modified_at)}
