"""Benchmarks of vllm-devclient: each compares the SDK with a baseline measured in the same run.

Run them all with `python -m benchmarks` (`--quick` for a fast pass, `--json PATH` to keep the numbers);
see `benchmarks/__main__.py`.
"""
