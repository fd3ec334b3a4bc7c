"""The release train: one command takes a vLLM release from PyPI to supported.

    python -m tools.train 0.35.0            # or: make release V=0.35.0

Stages, each a module, each handing one `Survey`/report type on (measuring never judges, judging does no
I/O):

- `install`: its pins (the previous release's, vllm replaced) and its own venv (`scripts/setup-release.sh`);
- `survey`: both frontends started in the kit: whether they start (the error when not), the engine
  utilities they call while starting, the routes each serves (the Python app's own route table,
  `/openapi.json`; vllm-rs's, probed path by path with a method no route takes: 405 served, 404 not);
- `compare`: the survey and the recordings against the release before: routes added and gone per
  frontend, utilities the kit does not know, answer shapes that changed, scenarios that miss the SDK's
  contract, routes no SDK method types;
- `report`: the short report of what needs a person, in Markdown, and the survey as JSON
  (`docs/train/<version>.*`).

The recording itself is `tools.fixtures record` (with its provenance), and the support matrix and every
generated table are written again by `scripts/figures.py`.
"""
