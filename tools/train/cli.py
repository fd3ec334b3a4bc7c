"""`python -m tools.train VERSION`: a release from PyPI to supported (see the package's docstring).

Exit codes: 0 done, nothing needs a person; 1 done, the report lists what needs a person; 2 a bad command
line or a stage that failed.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import click

from tools.fixtures import provenance, store
from tools.fixtures.releases import RELEASES, installed_vllm_version, version_tuple, vllm_rs_of
from vllm_devclient.routes import ROUTES
from vllm_devclient.testing.engine import known_utilities

from . import install as installing
from .compare import compare
from .report import markdown
from .survey import Survey, survey

T = TypeVar("T")
ROOT = installing.ROOT
REPORTS = ROOT / "docs" / "train"


def _previous(version: str) -> str:
    older = [r.version for r in RELEASES if version_tuple(r.version) < version_tuple(version)]
    if not older:
        raise click.BadParameter(f"no recorded release before {version}", param_hint="VERSION")
    return older[-1]


def _timed(timings: dict[str, float], stage: str, fn: Callable[[], T]) -> T:
    start = time.monotonic()
    click.echo(f"[train] {stage} ...", err=True)
    try:
        return fn()
    finally:
        timings[stage] = time.monotonic() - start


def _survey_of(version: str, python: str) -> Survey:
    saved = REPORTS / f"{version}.json"
    if saved.exists():
        return Survey.from_json(json.loads(saved.read_text())["survey"])
    found = _survey(version, python)
    _save(version, found, {}, {})
    return found


def _survey(version: str, python: str) -> Survey:
    candidates = {route.path for route in ROUTES}
    return survey(
        version,
        python=python,
        vllm_rs=vllm_rs_of(python),
        frontends=["python", "rust"],
        candidates=candidates,
    )


def _figures() -> str | None:
    """Write the support matrix and every table again; why not, when the tree does not allow it."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "figures.py")], cwd=ROOT, capture_output=True, text=True
    )
    return None if done.returncode == 0 else (done.stderr.strip() or done.stdout.strip())[-500:]


@click.command()
@click.argument("version")
@click.option("--previous", default=None, help="The release to compare with (default: the newest before).")
@click.option("--skip-install", is_flag=True, help="Use .venv-vllm-VERSION as it is.")
def cli(version: str, previous: str | None, skip_install: bool) -> None:
    """Install VERSION, survey both frontends, record every scenario, compare with the release before,
    regenerate the support matrix, and write docs/train/VERSION.md (what needs a person) and .json."""
    previous = previous or _previous(version)
    timings: dict[str, float] = {}
    python = str(installing.venv_python(version))
    if not skip_install:
        python = str(_timed(timings, "install", lambda: installing.install(version, previous)))
    got = installed_vllm_version(python)
    if got != version:
        raise click.ClickException(f"{python} has vLLM {got}, not {version}")
    new = _timed(timings, "survey", lambda: _survey(version, python))
    _save(version, new, timings, {})
    old_python = str(installing.venv_python(previous))
    old = _timed(timings, "survey of the release before", lambda: _survey_of(previous, old_python))
    started = [name for name, fe in new.frontends.items() if fe.started]
    if started:
        _timed(timings, "record", lambda: store.record(python=python, frontends=started, log=sys.stderr))
        _timed(timings, "provenance", lambda: _provenance(version, python))
    found = compare(
        new,
        old,
        [fixture.doc for fixture in store.load_fixtures_of(version)],
        [fixture.doc for fixture in store.load_fixtures_of(previous)],
        sdk_paths=[route.path for route in ROUTES],
        known_utilities=known_utilities(),
    )
    found.tables_error = _timed(timings, "support matrix and tables", _figures)
    facts = _facts(version)
    _save(version, new, timings, facts)
    (REPORTS / f"{version}.md").write_text(markdown(found, timings=timings, facts=facts))
    click.echo((REPORTS / f"{version}.md").read_text())
    sys.exit(1 if found.needs_a_person else 0)


def _save(version: str, new: Survey, timings: dict[str, float], facts: dict[str, str]) -> None:
    """The survey as JSON (the next release's train compares with it), written as soon as it exists."""
    REPORTS.mkdir(parents=True, exist_ok=True)
    doc = {"survey": new.as_json(), "timings_s": timings, "facts": facts}
    (REPORTS / f"{version}.json").write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")


def _provenance(version: str, python: str) -> None:
    base = store.DEFAULT_OUT / version
    doc = provenance.load(base)
    doc["wheel"] = provenance.wheel_facts(version)
    doc["vllm_rs"] = provenance.binary_facts(vllm_rs_of(python))
    provenance.save(base, doc)


def _facts(version: str) -> dict[str, str]:
    doc: dict[str, Any] = provenance.load(store.DEFAULT_OUT / version)
    wheel, binary = doc.get("wheel", {}), doc.get("vllm_rs", {})
    return {
        "wheel": f"{wheel.get('file')} sha256 {wheel.get('sha256')}",
        "vllm-rs": f"sha256 {binary.get('sha256')}, reports {binary.get('version_reported')!r}",
        "recorded by": str((doc.get("recordings") or [{}])[-1].get("recorder_commit")),
    }


def main(argv: Sequence[str] | None = None) -> None:
    cli.main(args=list(argv) if argv is not None else None, prog_name="python -m tools.train")
