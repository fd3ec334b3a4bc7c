"""The GPU suite: the offload-reload check on real servers and its engine-side instruments (README.md)."""
