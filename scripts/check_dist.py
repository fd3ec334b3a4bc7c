#!/usr/bin/env python3
"""Build the sdist and the wheel and check what a user would install (`make dist-check`, part of `make test`).

- `python -m build` and `twine check --strict` on both;
- the wheel's metadata: the SPDX licence and its LICENSE file, classifiers, project URLs, no pytest11 entry
  point (the pytest plugin is opt-in), the CLI's JSON schema inside, a core install without click, rich or
  pytest, and an `[all]` extra that brings no
  test-only package (pytest, tokenizers, huggingface_hub), read from the metadata itself;
- the wheel carries the client only: no GPU suite (`gpu_tests/`, `offload_check/`) and no fixture tooling
  (`tools/`: record, drift);
- the sdist carries what its tests read (tests/, rust_fixtures/, the root conftest.py, the figures'
  generator and artifacts, tools/fixtures/) and not gpu_tests/, which none of them imports;
- `pip install --dry-run 'wheel[all]'` resolves without pytest (needs the package index: skipped, with a
  line saying so, when it cannot be reached);
- the core install needs no HTTP stack but h11 (no httpx, httpx2 or aiohttp), each of them an extra in [all];
- in a fresh venv with only the core install: none of httpx, httpx2, aiohttp, httpcore or anyio is
  installed; a DevClient and an AsyncDevClient answer a local server (raw responses the SDK's own), importing
  none of them; `transport="httpx"` is a MissingExtraError naming `[httpx]`; `vllm-devclient --help` exits 7
  with one line naming `pip install 'vllm-devclient[cli]'` (needs the index for h11 and pydantic; skipped
  likewise).

With `--sdist-tests` (`make sdist-test`; a few minutes): the sdist's own tests, run from the unpacked sdist
in a fresh venv with `[dev]` and no vLLM, pass or skip (the root conftest.py skips what needs vLLM or the
GSM8K copy there).

Exit 0 when everything checked passed, 1 otherwise.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tarfile
import tempfile
import venv
import zipfile
from email.parser import Parser
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parent.parent
NAME = "vllm-devclient"
TEST_ONLY = {"pytest", "tokenizers", "huggingface-hub", "cryptography"}
HTTP_STACKS = {"httpx", "httpx2", "aiohttp"}
# What a core install must not bring: the optional stacks and what they stand on.
NOT_IN_CORE = HTTP_STACKS | {"httpcore", "httpcore2", "anyio"}
GPU_IMPORT = re.compile(r"^\s*(from|import) gpu_tests\b", re.M)
problems: list[str] = []


def check(ok: bool, what: str) -> None:
    print(f"{'ok  ' if ok else 'FAIL'} {what}", flush=True)
    if not ok:
        problems.append(what)


def run(*cmd: str, **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, **kw)  # type: ignore[call-overload,no-any-return]


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def extra_closure(requires: list[Requirement], extra: str = "") -> set[str]:
    """Every distribution `pip install NAME[extra]` asks for directly (the core's too), following NAME's own
    extras."""
    wanted: set[str] = set()
    seen: set[str] = set()
    todo = ["", extra]
    while todo:
        current = todo.pop()
        if current in seen:
            continue
        seen.add(current)
        for req in requires:
            if req.marker is not None and not req.marker.evaluate({"extra": current}):
                continue
            if req.marker is None and current != "":
                continue  # a core requirement, counted once under ""
            if canonical(req.name) == NAME:
                todo += sorted(req.extras)
            else:
                wanted.add(canonical(req.name))
    return wanted


def check_wheel(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        info = next(n for n in names if n.endswith(".dist-info/METADATA"))
        meta = Parser().parsestr(zf.read(info).decode())
        entry_points = next((zf.read(n).decode() for n in names if n.endswith("entry_points.txt")), "")
    check(meta["License-Expression"] == "Apache-2.0", "wheel: License-Expression is Apache-2.0")
    check(any(n.endswith(".dist-info/licenses/LICENSE") for n in names), "wheel: LICENSE in the dist-info")
    check(len(meta.get_all("Classifier") or []) >= 5, "wheel: classifiers")
    check(bool(meta.get_all("Project-URL")), "wheel: project URLs")
    check("pytest11" not in entry_points, "wheel: no pytest11 entry point (the plugin is opt-in)")
    check("vllm_devclient/cli/schema.json" in names, "wheel: the CLI's JSON schema is installed")
    check("vllm_devclient/route_support.json" in names, "wheel: the route support matrix is installed")
    sample = {f"vllm_devclient/data/gsm8k_sample/{n}" for n in ("train.jsonl", "test.jsonl", "LICENSE")}
    check(sample <= set(names), "wheel: the GSM8K sample and its license are installed")
    # The wheel is the client: the GPU suite and the fixture tooling stay in the repository.
    campaign = sorted(n for n in names if re.search(r"(^|/)(offload_check|gpu_tests|tools|fixtures)/", n))
    check(not campaign, f"wheel: no GPU suite or fixture tooling ({campaign[:3]})")
    requires = [Requirement(r) for r in meta.get_all("Requires-Dist") or []]
    core = extra_closure(requires)
    check(
        {"h11", "pydantic"} <= core and not core & {"click", "rich", "pytest"},
        f"wheel: the core install has no CLI or test package ({sorted(core)})",
    )
    check(not core & NOT_IN_CORE, f"wheel: the core install needs no HTTP stack but h11 ({sorted(core)})")
    everything = extra_closure(requires, "all")
    check(not everything & TEST_ONLY, f"wheel: [all] has no test-only package ({sorted(everything)})")
    check({"click", "rich"} <= everything, "wheel: [all] has the CLI")
    check(HTTP_STACKS <= everything, f"wheel: [all] has every HTTP stack ({sorted(HTTP_STACKS)})")


def check_sdist(sdist: Path) -> None:
    with tarfile.open(sdist) as tf:
        names = {"/".join(n.split("/")[1:]) for n in tf.getnames()}
    # tests/test_doc_figures.py reads the generator and the artifacts the docs' figures come from.
    needed_files = (
        "LICENSE", "conftest.py", "tests/conftest.py", "tests/test_replay.py", "docs/cli.md",
        "tools/fixtures/replay.py",  # the replay tests' fixture library
    )  # fmt: skip
    artifacts = (
        "scripts/figures.py",
        "docs/parity.json",
        "rust_fixtures/summary.json",
        "benchmarks/results.json",
    )
    for needed in needed_files + artifacts:
        check(needed in names, f"sdist: has {needed}")
    check(
        any(n.startswith("rust_fixtures/") and n.endswith(".json") for n in names),
        "sdist: has rust_fixtures/",
    )
    # It leaves the GPU suite out, so none of its tests may import it.
    check(not any(n.startswith("gpu_tests/") for n in names), "sdist: no gpu_tests/")
    tests = [n for n in names if n.startswith("tests/") and n.endswith(".py")]
    importers = sorted(n for n in tests if GPU_IMPORT.search(_text(sdist, n)))
    check(not importers, f"sdist: no test of tests/ imports gpu_tests ({importers})")


def _text(sdist: Path, name: str) -> str:
    with tarfile.open(sdist) as tf:
        member = next(m for m in tf.getmembers() if "/".join(m.name.split("/")[1:]) == name)
        handle = tf.extractfile(member)
        return handle.read().decode() if handle else ""


def check_resolution(wheel: Path) -> None:
    """What pip would install for wheel[all], from the package index."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        proc = run(
            sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet",
            "--report", str(report), f"{wheel}[all]",
        )  # fmt: skip
        if proc.returncode != 0:
            print(
                f"skip pip install --dry-run 'wheel[all]': the index is not reachable ({proc.stderr[-200:]})"
            )
            return
        chosen = {canonical(i["metadata"]["name"]) for i in json.loads(report.read_text())["install"]}
    check(
        not chosen & TEST_ONLY,
        f"pip resolves wheel[all] without {sorted(TEST_ONLY)} ({len(chosen)} packages)",
    )


# Run in the core-only venv: a local server, both clients with raw responses, no optional stack imported.
_CORE_CALLS = """
import asyncio, json, sys, threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

class Answer(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_GET(self):
        body = b'{"is_paused": false}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass

server = ThreadingHTTPServer(("127.0.0.1", 0), Answer)
threading.Thread(target=server.serve_forever, daemon=True).start()
url = f"http://127.0.0.1:{server.server_address[1]}"
from vllm_devclient import AsyncDevClient, DevClient, MissingExtraError
out = {}
with DevClient(url) as client:
    raw = client.with_raw_response.is_paused()
    out["sync"] = [raw.parsed, type(raw.http_response).__name__]
async def main():
    async with AsyncDevClient(url) as client:
        raw = await client.with_raw_response.is_paused()
        out["async"] = [raw.parsed, type(raw.http_response).__name__]
asyncio.run(main())
try:
    DevClient(url, transport="httpx")
except MissingExtraError as exc:
    out["httpx"] = exc.extra
out["imported"] = sorted({m.split(".")[0] for m in sys.modules} & set(sys.argv[1:]))
server.shutdown()
print(json.dumps(out))
"""


def check_core_install(wheel: Path) -> None:
    """Only the core install: no optional HTTP stack installed or imported, both clients work; the command
    says what to install, in one line, and exits 7."""
    with tempfile.TemporaryDirectory() as tmp:
        env = Path(tmp) / "core"
        venv.create(env, with_pip=True)
        python = str(env / "bin" / "python")
        proc = run(python, "-m", "pip", "install", "--quiet", str(wheel))
        if proc.returncode != 0:
            print(f"skip the core-only install: the index is not reachable ({proc.stderr[-200:]})")
            return
        listed = run(python, "-m", "pip", "list", "--format=json")
        installed = {canonical(p["name"]) for p in json.loads(listed.stdout or "[]")}
        check(
            bool(installed) and not installed & NOT_IN_CORE,
            f"core install: no optional HTTP stack installed ({sorted(installed & NOT_IN_CORE)})",
        )
        calls = run(python, "-c", _CORE_CALLS, *sorted(NOT_IN_CORE), cwd=tmp)
        try:
            got = json.loads(calls.stdout.splitlines()[-1]) if calls.returncode == 0 else calls.stderr[-800:]
        except (IndexError, ValueError):
            got = calls.stdout[-800:]
        want = {
            "sync": [False, "WireResponse"],
            "async": [False, "WireResponse"],
            "httpx": "httpx",
            "imported": [],
        }
        check(got == want, f"core install: both clients answer on h11 alone, raw responses included ({got})")
        done = run(str(env / "bin" / "vllm-devclient"), "--help")
    one_line = done.stdout == "" and len(done.stderr.splitlines()) == 1
    check(
        done.returncode == 7 and one_line and "pip install 'vllm-devclient[cli]'" in done.stderr,
        f"core install: vllm-devclient --help exits 7 with one line (got {done.returncode}: {done.stderr!r})",
    )


def check_sdist_tests(sdist: Path) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        src, env = Path(tmp) / "src", Path(tmp) / "venv"
        with tarfile.open(sdist) as tf:
            tf.extractall(tmp, filter="data")
        next(Path(tmp).glob("vllm_devclient-*")).rename(src)
        venv.create(env, with_pip=True)
        proc = run(str(env / "bin" / "python"), "-m", "pip", "install", "--quiet", f"{src}[dev]")
        if proc.returncode != 0:
            print(f"skip the sdist's tests: could not install its [dev] extra ({proc.stderr[-300:]})")
            return
        tests = run(
            str(env / "bin" / "python"), "-m", "pytest", "tests", "-q", "-p", "no:cacheprovider", cwd=src
        )
    summary = (tests.stdout.strip().splitlines() or [""])[-1]
    check(tests.returncode == 0, f"the sdist's tests pass or skip without vLLM ({summary})")


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        built = run(sys.executable, "-m", "build", "--outdir", str(out), str(ROOT))
        check(
            built.returncode == 0,
            "python -m build" + ("" if built.returncode == 0 else f": {built.stderr[-2000:]}"),
        )
        if built.returncode != 0:
            return 1
        wheel, sdist = next(out.glob("*.whl")), next(out.glob("*.tar.gz"))
        twine = run(sys.executable, "-m", "twine", "check", "--strict", str(wheel), str(sdist))
        check(
            twine.returncode == 0,
            "twine check --strict" + ("" if twine.returncode == 0 else f": {twine.stdout}"),
        )
        check_wheel(wheel)
        check_sdist(sdist)
        check_resolution(wheel)
        check_core_install(wheel)
        if "--sdist-tests" in sys.argv[1:]:
            check_sdist_tests(sdist)
    if problems:
        print(f"{len(problems)} problem(s): " + "; ".join(problems))
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
