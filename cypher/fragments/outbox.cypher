// @outbox(event): the webhook outbox. A change's own statement writes its event here, so the
// event commits or rolls back with the change: one :WebhookDelivery per enabled webhook of the
// event's tenant that subscribes to its type ("*": every type) and whose containers hold the
// token (for a link, both ends). `event` is a map {event_id, type, at, tenant_id, token_id,
// token_type, containers, child_containers, application_id, parent_id, child_id, reason,
// merged_into}, or null for no event. A tenant without webhooks costs one index seek
// (webhook_tenant_status, named by a hint: with no webhook stored, the planner could otherwise
// pick a scan of the label, which grows with every tenant's webhooks) and writes nothing. A
// unit subquery: the statement's rows are kept.
CALL ({node}) {
  WITH {node} AS event_ WHERE event_ IS NOT NULL
  MATCH (hook_:Webhook {tenant_id: event_.tenant_id, status: "enabled"})
    USING INDEX hook_:Webhook(tenant_id, status)
  WHERE (event_.type IN hook_.events OR "*" IN hook_.events)
    AND any(c_ IN event_.containers WHERE any(p_ IN hook_.containers WHERE c_ STARTS WITH p_))
    AND (event_.child_containers IS NULL
         OR any(c_ IN event_.child_containers WHERE any(p_ IN hook_.containers WHERE c_ STARTS WITH p_)))
  CREATE (delivery_:WebhookDelivery)
  SET delivery_ = event_, delivery_.webhook_id = hook_.id, delivery_.state = "pending",
      delivery_.attempts = 0, delivery_.next_at = event_.at, delivery_.child_containers = null
}
