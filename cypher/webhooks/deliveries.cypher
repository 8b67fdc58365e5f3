// A page of a webhook's delivery attempts, newest first, before the position ($before_at,
// $before_id); no row when the tenant has no such webhook within the caller's readable
// containers ($prefixes).
MATCH (w:Webhook {tenant_id: $tenant_id, id: $id})
WHERE @all_in_prefixes(w)
CALL (w) {
  OPTIONAL MATCH (a:WebhookAttempt {webhook_id: w.id})
  WHERE a.at <= datetime($before_at) AND (a.at < datetime($before_at) OR a.id < $before_id)
  WITH a ORDER BY a.at DESC, a.id DESC LIMIT $limit
  RETURN collect(a {.id, .event_id, .type, .attempt, .outcome, .status, .error, .duration_ms,
                    .response, at: toString(a.at), next_at: toString(a.next_at)}) AS attempts
}
RETURN attempts
