"""Key custody: where the key-encryption key lives (docs/key-custody.md)."""
