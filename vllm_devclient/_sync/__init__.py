"""The synchronous surfaces, generated from `_async/` by scripts/unasync.py (run `make generate`)."""
