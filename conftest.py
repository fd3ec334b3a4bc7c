"""This repository's tests use the harness's pytest plugin. It is opt-in (no pytest11 entry point): a project
that wants the fixtures loads it the same way, or with `pytest -p vllm_devclient.testing.pytest_plugin`."""

pytest_plugins = ["vllm_devclient.testing.pytest_plugin"]
