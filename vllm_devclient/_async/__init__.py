"""The asynchronous surfaces, the source the synchronous ones are generated from (scripts/unasync.py)."""
