"""The RL loop on a real engine (issue 26): the GPU runner of points 1-4 (`run_rl.py`), its worker extension,
its reports' collection and figures (README.md)."""
