// The sender claims up to $limit due deliveries (of the $scan due soonest), skipping the
// webhooks in $busy (as many of their deliveries held in this process as it allows): one slow
// endpoint never holds back the others'. Of one webhook it takes at most $room[webhook] (what
// the process may still take on for it) or, for a webhook not in $room, $room_default.
// A claim is a lease: the due time moves $lease_ms on, so another worker or replica takes the
// delivery only after the lease lapses (this one died or lost Neo4j). Each delivery is
// write-locked and read again under the lock, where reads see the committed state: of two
// claimers racing for one, the second finds it no longer due. The re-check reads `not_before`
// (kept equal to `next_at` by every writer), a property this statement has not read before
// the lock: `next_at` came with the index seek.
// Returns what the sender needs: the delivery, the webhook's URL and encrypted secrets, and
// the tenant's wrapped keys to decrypt them (those only: a row per delivery, and the driver's
// decoding of a date costs more than the rest of the row).
// Ordered as the (state, next_at) index is (state is one value here), so the seek reads the
// due deliveries in order and stops after $scan of them: ordered by next_at alone, the planner
// sorted every due delivery, and a backlog (an endpoint down for hours) made each claim read it
// all.
MATCH (d:WebhookDelivery)
WHERE d.state = "pending" AND d.next_at <= datetime() AND NOT d.webhook_id IN $busy
WITH d ORDER BY d.state, d.next_at LIMIT $scan
WITH d.webhook_id AS hook, collect(d) AS due
UNWIND due[..coalesce($room[hook], $room_default)] AS d
WITH d ORDER BY d.next_at LIMIT $limit
SET d._lock = true
REMOVE d._lock
WITH d WHERE d.state = "pending" AND coalesce(d.not_before, d.at) <= datetime()
MATCH (w:Webhook {tenant_id: d.tenant_id, id: d.webhook_id})
MATCH (tenant:Tenant {id: d.tenant_id})
WITH d, w, tenant, datetime() + duration({milliseconds: $lease_ms}) AS until
SET d.next_at = until, d.not_before = until, d.claim = $claim
RETURN d {.event_id, .type, .tenant_id, .webhook_id, .token_id, .token_type, .containers,
          .application_id, .parent_id, .child_id, .reason, .merged_into, .attempts,
          at: toString(d.at)} AS delivery,
       w {.id, .url, .status, .secret_ct, .previous_secret_ct,
          previous_signs: w.previous_secret_until > datetime()} AS webhook,
       tenant {.dek_version, .wrapped_deks, .wrapped_hmac_key} AS tenant
