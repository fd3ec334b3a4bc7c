"""The synchronous surfaces, generated from `_async/` by scripts/generate.py (run `make generate`)."""
