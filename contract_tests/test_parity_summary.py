"""The parity report at the end of a run: one line saying where it is, the ~150-line table only with -v."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest


class _Reporter:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def section(self, title: str) -> None:
        self.lines.append(f"== {title}")

    def write_line(self, line: str) -> None:
        self.lines.append(line)


def _conftest(config: pytest.Config) -> ModuleType:
    (module,) = [
        p
        for p in config.pluginmanager.get_plugins()
        if isinstance(p, ModuleType)
        and Path(getattr(p, "__file__", "") or "") == Path(__file__).with_name("conftest.py")
    ]
    return module


def _summary(config: pytest.Config, verbosity: int, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    reporter = _Reporter()
    with monkeypatch.context() as m:
        m.setattr(config, "get_verbosity", lambda *_: verbosity)
        _conftest(config).pytest_terminal_summary(reporter, 0, config)
    return reporter.lines


def test_the_summary_names_the_report_and_shows_it_only_with_v(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    config, key = request.config, _conftest(request.config)._REPORT_KEY
    saved = config.stash.get(key, None)
    markdown = "\n".join(f"| `scenario_{i}` | same |" for i in range(150))
    config.stash[key] = (markdown, tmp_path / "parity.md")
    try:
        quiet, loud = _summary(config, 0, monkeypatch), _summary(config, 1, monkeypatch)
    finally:
        if saved is None:
            del config.stash[key]
        else:
            config.stash[key] = saved
    assert quiet == [
        "== parity report (Python vs Rust frontend)",
        f"150 lines in {tmp_path / 'parity.md'} (-v prints them; --parity-report PATH keeps them)",
    ]
    assert loud == ["== parity report (Python vs Rust frontend)", markdown]
