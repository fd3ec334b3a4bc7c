"""The synchronous surfaces, generated from `_async/` by scripts/unasync.py (run `make generate`); the route
methods are derived from the async ones (`routes.py`)."""
