"""Import time of `vllm_devclient` against `import httpx` and `import httpx, pydantic`, in fresh interpreters.

Each sample is one new `python -I -c ...` process that times its own import statement with perf_counter
(interpreter start-up is excluded; it is the same for every variant and would only dilute the ratio). The
variants take turns in a shuffled order each round. A separate pass lists which heavy optional modules
`import vllm_devclient` pulls in, and `-X importtime` attributes the extra time to the modules that
`import httpx, pydantic` does not load.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import time
from typing import Any

from ._common import Stats, compare, ratio, result, value

# The optional extras (and the heaviest things anybody could import by accident).
OPTIONAL_HEAVY = ("zmq", "msgspec", "prometheus_client", "click", "rich", "tqdm", "tokenizers")
ALSO_HEAVY = ("torch", "vllm", "numpy", "anyio", "h2", "asyncio")
VARIANTS = {
    "httpx": "import httpx",
    "httpx+pydantic": "import httpx, pydantic",
    # pydantic loads its machinery lazily, on the first model class: this is what any pydantic user pays.
    "httpx+pydantic model": "import httpx, pydantic\nclass M(pydantic.BaseModel):\n    x: int",
    "vllm_devclient": "import vllm_devclient",
}
_TIMER = "import time\nt = time.perf_counter()\n{stmt}\nprint(time.perf_counter() - t)"
_MODULES = "import sys, json\nb = set(sys.modules)\n{stmt}\nprint(json.dumps(sorted(set(sys.modules) - b)))"


def _python(code: str, *flags: str) -> subprocess.CompletedProcess[str]:
    # -I: no cwd on sys.path, no user site, no PYTHON* env: the installed package, as a user gets it.
    return subprocess.run(
        [sys.executable, "-I", *flags, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )


def _time_import(stmt: str) -> float:
    return float(_python(_TIMER.format(stmt=stmt)).stdout.strip())


def _new_modules(stmt: str) -> list[str]:
    out: list[str] = json.loads(_python(_MODULES.format(stmt=stmt)).stdout)
    return out


def _importtime(stmt: str) -> dict[str, int]:
    """Module -> self time (us) from `-X importtime`."""
    own: dict[str, int] = {}
    for line in _python(stmt, "-X", "importtime").stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        self_us, _cumulative, name = line.split(":", 1)[1].split("|")
        own[name.strip()] = int(self_us)
    return own


def _top_level(modules: list[str]) -> set[str]:
    return {m.split(".")[0] for m in modules}


def _extra_cost(runs: int) -> list[dict[str, Any]]:
    """The modules vllm_devclient loads beyond httpx+pydantic, by median self time over `runs` runs."""
    base: set[str] = set()
    samples: dict[str, list[int]] = {}
    for _ in range(runs):
        base |= set(_importtime(VARIANTS["httpx+pydantic model"]))
        for name, us in _importtime(VARIANTS["vllm_devclient"]).items():
            samples.setdefault(name, []).append(us)
    extra = {name: Stats.of(v).median for name, v in samples.items() if name not in base}
    ranked = sorted(extra.items(), key=lambda kv: -kv[1])
    return [{"module": name, "self_ms": round(us / 1000, 2)} for name, us in ranked]


_METHOD = (
    "{n} fresh `python -I -c` processes per variant, interleaved in shuffled rounds; each times its own "
    "import statement with perf_counter (interpreter start-up excluded). Heavy modules: sys.modules after "
    "the import, minus what httpx + one pydantic model load (httpx itself imports click/rich/pygments when "
    "they are installed, for its CLI). Attribution: median self time from `-X importtime` of the modules "
    "only vllm_devclient loads. pydantic builds its machinery on the first model class, so `import "
    "pydantic` alone understates what any pydantic user pays: the goal is set against httpx + one model."
)


def _timed_rounds(rounds: int, budget: float) -> dict[str, list[float]]:
    """Each variant's import times (s), one per round, the variants in a shuffled order each round; after
    3 rounds, no new round once `budget` seconds have gone."""
    _time_import("import httpx, pydantic, vllm_devclient")  # warm the bytecode caches and the page cache
    samples: dict[str, list[float]] = {name: [] for name in VARIANTS}
    rng = random.Random(0)
    names = list(VARIANTS)
    began = time.perf_counter()
    for n in range(rounds):
        if n >= 3 and time.perf_counter() - began > budget:
            break
        rng.shuffle(names)
        for name in names:
            samples[name].append(_time_import(VARIANTS[name]))
    return samples


def _heavy_loaded() -> tuple[list[str], list[str], list[str]]:
    """The optional heavy modules `import vllm_devclient` loads, those of them that httpx + a pydantic model
    do not load, and the other heavy modules only it loads."""
    loaded_top = _top_level(_new_modules(VARIANTS["vllm_devclient"]))
    by_baseline = _top_level(_new_modules(VARIANTS["httpx+pydantic model"]))
    optional = [m for m in OPTIONAL_HEAVY if m in loaded_top]
    optional_own = [m for m in optional if m not in by_baseline]
    other_heavy = [m for m in ALSO_HEAVY if m in loaded_top and m not in by_baseline]
    return optional, optional_own, other_heavy


def _rows(
    ms: dict[str, Stats],
    optional: list[str],
    optional_own: list[str],
    other_heavy: list[str],
    extra: list[dict[str, Any]],
) -> list[dict[str, Any]]:
    """The rows: the import time against each baseline, the heavy modules, what the extra time goes to."""
    sdk = ms["vllm_devclient"]
    return [
        compare(
            "import vllm_devclient vs import httpx",
            baseline_name="import httpx",
            baseline=ms["httpx"],
            sdk=sdk,
            unit="ms",
        ),
        compare(
            "import vllm_devclient vs import httpx, pydantic",
            baseline_name="import httpx, pydantic",
            baseline=ms["httpx+pydantic"],
            sdk=sdk,
            unit="ms",
        ),
        compare(
            "import vllm_devclient vs httpx + one pydantic model",
            baseline_name="import httpx, pydantic + 1 model",
            baseline=ms["httpx+pydantic model"],
            sdk=sdk,
            unit="ms",
            goal="<= 1.25x",
            ok=ratio(sdk.median, ms["httpx+pydantic model"].median) <= 1.25,
        ),
        value(
            "optional heavy modules loaded only because of vllm_devclient",
            ", ".join(optional_own) or "none",
            goal="none",
            ok=not optional_own,
            loaded_including_httpx=optional,
        ),
        value(
            "other heavy modules that httpx + a pydantic model do not load",
            ", ".join(other_heavy) or "none",
        ),
        value(
            "import time beyond httpx + a pydantic model, top modules (-X importtime self ms)",
            ", ".join(f"{e['module']} {e['self_ms']:.1f}" for e in extra[:6]),
            unit="ms",
            modules_total=len(extra),
            self_ms_total=round(sum(e["self_ms"] for e in extra), 1),
        ),
    ]


def run(quick: bool = False) -> dict[str, Any]:
    # A loaded machine gets fewer rounds, not a run without end.
    samples = _timed_rounds(3 if quick else 20, 8.0 if quick else 30.0)
    ms = {name: Stats.of(v).scaled(1e3) for name, v in samples.items()}
    optional, optional_own, other_heavy = _heavy_loaded()
    extra = _extra_cost(1 if quick else 2)
    return result(
        "import",
        method=_METHOD.format(n=len(samples["httpx"])),
        rows=_rows(ms, optional, optional_own, other_heavy, extra),
        samples_ms={name: [round(s * 1e3, 3) for s in v] for name, v in samples.items()},
        extra_modules=extra,
        heavy_loaded=optional,
    )
