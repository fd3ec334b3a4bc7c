"""Every figure in the docs comes from a committed artifact, or says that it is an estimate.

- Each doc, and rust_fixtures/summary.json, agrees with the artifact it is generated from
  (`scripts/figures.py --check`; `make figures` writes them again).
- The parity artifact names today's scenarios and their documented differences (the contract suite's
  test_parity.py checks the rest against its own run; tests/test_benchmarks_smoke.py checks
  benchmarks/results.json against the benchmarks' rows).
- No other number with a unit stands in the docs' prose: outside a figure, a paragraph, list item or table
  (row or header) that quotes one says "estimate".
- The generator itself: a stale figure is rewritten, an unknown one is an error.
"""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path
from types import ModuleType

import pytest

from vllm_devclient.testing.scenarios import SCENARIOS

ROOT = Path(__file__).resolve().parent.parent


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("figures", ROOT / "scripts" / "figures.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


figures = _load()


def test_every_doc_agrees_with_its_artifact() -> None:
    stale = figures.stale()
    assert not stale, f"differ from their artifacts (run `make figures`): {sorted(stale)}"


def test_the_parity_artifact_names_the_current_scenarios() -> None:
    summary = json.loads((ROOT / figures.PARITY).read_text())["summary"]
    assert summary["scenarios"] == [sc.name for sc in SCENARIOS], "run `python scripts/figures.py --parity`"
    by_design = {sc.name: sc.sdk_difference for sc in SCENARIOS if sc.sdk_difference}
    assert summary["sdk_differences_by_design"] == by_design
    assert summary["sdk_mismatches"] == []
    assert set(summary["raw_differences"]) <= set(summary["scenarios"])


# Numbers with a unit: "0.2 s", "2x", "50 MB", "105 scenarios", "1-2 minutes", "~18-25 KB".
UNITS = "s|ms|us|µs|KB|MB|GB|min|minutes|seconds|characters|scenarios|fixtures|files|targets|calls"
FIGURE = re.compile(
    r"(?<![\w.`/-])~?\d[\d,]*(?:\.\d+)?(?:[-\u2013]\d+(?:\.\d+)?)?" rf"(?:x|%| (?:{UNITS}))(?!\w)"
)


def _units(text: str) -> list[list[str]]:
    """The doc's prose in units that must each say "estimate" where they quote a figure: a paragraph, a
    list item, or a table row together with its table's header. Code blocks are left out."""
    units: list[list[str]] = []
    header: str | None = None
    in_code = False
    for line in text.splitlines():
        if line.startswith("```"):
            in_code = not in_code
            continue
        if in_code:
            continue
        if not line.strip():
            units.append([])
            header = None
        elif line.startswith("|"):
            header = header or line
            units.append([header, line])
        elif re.match(r"\s*(?:[-*]|\d+\.) ", line) or not units or units[-1][:1] == [header]:
            units.append([line])
        else:
            units[-1].append(line)
    return [u for u in units if u]


GENERATED_BLOCK = re.compile(r"<!-- (?P<name>[\w-]+):begin -->.*?<!-- (?P=name):end -->", re.S)


def unmarked_figures(text: str) -> list[str]:
    """Figures in `text` outside figure markers, another generator's block (`<!-- NAME:begin -->` ...
    `<!-- NAME:end -->`, e.g. scripts/weight_sync_compare.py's) and inline code whose unit does not say
    "estimate"."""
    bare = GENERATED_BLOCK.sub("", figures.MARKER.sub("", text))
    found = []
    for unit in _units(bare):
        prose = re.sub(r"`[^`]*`", "", " ".join(unit))
        if "estimate" in prose.lower():
            continue
        found += [f"{m.group(0)!r} in: {unit[-1].strip()[:100]}" for m in FIGURE.finditer(prose)]
    return found


@pytest.mark.parametrize("doc", figures.DOCS)
def test_no_figure_stands_in_the_prose_unmarked(doc: str) -> None:
    found = unmarked_figures((ROOT / doc).read_text())
    assert not found, "generate these (scripts/figures.py) or say they are estimates:\n" + "\n".join(found)


def test_the_prose_check_finds_an_unmarked_figure() -> None:
    assert unmarked_figures("It is about 2x faster.\n\nIt takes 5 s (an estimate).\n") == [
        "'2x' in: It is about 2x faster."
    ]
    assert unmarked_figures("| what | time (estimate) |\n| --- | --- |\n| install | 67 s |\n") == []
    assert unmarked_figures("Within <!-- figure:bounds.last-try -->0.2 s<!-- /figure -->, `10 s`.") == []


def test_a_stale_figure_is_rewritten() -> None:
    inline = "a last try of <!-- figure:bounds.last-try -->9 s<!-- /figure -->."
    assert figures.rewrite(inline) == "a last try of <!-- figure:bounds.last-try -->0.2 s<!-- /figure -->."
    block = "<!-- figure:parity.summary -->\nold\n<!-- /figure -->"
    fresh = figures.rewrite(block)
    assert fresh.startswith("<!-- figure:parity.summary -->\n```text\n") and fresh.endswith(
        "```\n<!-- /figure -->"
    )
    assert f"{len(SCENARIOS)} scenarios, python vs rust" in fresh


def test_an_unknown_figure_or_a_missing_row_is_an_error() -> None:
    with pytest.raises(figures.FigureError, match="no figure 'bogus'"):
        figures.rewrite("<!-- figure:bogus -->1<!-- /figure -->")
    with pytest.raises(figures.FigureError, match="make bench"):
        figures._row("fleet", "a row that no benchmark makes")
