"""Helpers shared by test modules (new ones go here, not in conftest.py or factories.py)."""
