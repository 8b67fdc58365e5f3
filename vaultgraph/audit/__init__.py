"""The audit trail's domain: events, the per-request note services add to, chain verification.

Every request that reaches a route leaves one event (api/middleware.py `audit`); see
docs/audit.md and docs/security.md.
"""
