"""The GPU suite: the offload-reload check on real servers (see README.md)."""

# The mutation run's connector extra: vLLM's CPU offloading spec, except that loads read zeroed CPU blocks
# (gpu_tests/kv_corruption.py, imported inside the engine processes; this module stays free of torch).
MUTATION_EXTRA = {"spec_name": "CorruptingCPUOffloadingSpec", "spec_module_path": "gpu_tests.kv_corruption"}
