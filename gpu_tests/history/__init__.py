"""Issue 35: the offload check graded on vLLM's own bug history (``bugs.py``: the bugs as data)."""
