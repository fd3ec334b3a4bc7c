"""`python -m vllm_devclient.cli`: the same as the `vllm-devclient` command."""

from . import main

main()
