"""The pytest plugin and the process helpers other projects use to run a vault in their tests."""
