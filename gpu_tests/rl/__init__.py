"""The RL loop on a real engine (issue 26): the worker extension and the recipe of the GPU run (README.md)."""
