"""The RL frameworks' weight-sync steps beside the SDK's, as observed on the real frontends (issue 50).

    python -m tools.rl_frameworks --out docs/rl_frameworks.json   # run, write the record
    python -m tools.rl_frameworks --check docs/rl_frameworks.json # run, exit 1 when the record differs

What SkyRL, prime-rl, TRL and verl send to vLLM at each step is transcribed from their source
(`transcription`: requests as data, with the file and function), and so is the SDK call for each step (`sdk`:
a `Call` performed through the public API). The runner (`runner`) starts vLLM's real Python and Rust frontends
on the kit's scripted engine (`vllm_devclient.testing`, the `extras` setup: LoRA enabled), sends every
framework's requests raw and performs every SDK call, each through a recording proxy (`proxy`), and keeps
what reached the servers, their statuses and the engine calls they caused, and whether the SDK's requests
cover the framework's (`compare`). `docs/rl_frameworks.json` is that record; scripts/figures.py renders it
into docs/weight-sync.md (`render`), and contract_tests/test_rl_frameworks_run.py runs it again and fails
when the committed record differs from what a run observes (its date and commit aside).
"""
