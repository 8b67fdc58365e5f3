// @live(node): the token has not expired.
// Written NOT coalesce(expires_at <= now, false) on purpose: the `IS NULL OR > now` form lets the
// planner union a range scan of every future-expiring token (all tenants) into a seek.
NOT coalesce({node}.expires_at <= datetime(), false)
