// Claims a stopping sender gives back unsent ($deliveries: {webhook_id, event_id, claim}):
// due again at once, for any sender to take, rather than after the lease. Only a claim still
// held is released (one that lapsed may be another worker's by now).
UNWIND $deliveries AS r
MATCH (d:WebhookDelivery {webhook_id: r.webhook_id, event_id: r.event_id})
WHERE d.claim = r.claim
SET d.claim = null
WITH d WHERE d.state = "pending"
SET d.next_at = datetime(), d.not_before = datetime()
RETURN count(d) AS released
