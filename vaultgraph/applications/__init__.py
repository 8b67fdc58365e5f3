"""Applications, their API keys and access rules: model, request schemas and response view."""
