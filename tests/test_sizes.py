"""`scripts/sizes.py --check` (run by `make lint`) fails on a function over 60 lines or a class over 300."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "sizes.py"


def function(name: str, lines: int, decorators: int = 0) -> str:
    """A function of exactly `lines` lines from its `def` (a docstring and assignments), after `decorators`
    decorator lines, which do not count."""
    body = [f'    """{name}."""'] + [f"    x{i} = {i}" for i in range(lines - 2)]
    return "\n".join(["@staticmethod"] * decorators + [f"def {name}() -> None:", *body]) + "\n"


def klass(name: str, lines: int) -> str:
    body = [f"    a{i} = {i}" for i in range(lines - 1)]
    return "\n".join([f"class {name}:", *body]) + "\n"


def sizes(root: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *flags, "--root", str(root)], capture_output=True, text=True
    )


def check(root: Path) -> subprocess.CompletedProcess[str]:
    return sizes(root, "--check")


def test_a_long_function_and_a_long_class_fail_the_check_with_file_line_name_and_length(
    tmp_path: Path,
) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "mod.py").write_text(
        function("fits", 60, decorators=3) + "\n\n" + function("too_long", 61) + "\n\n" + klass("Big", 301)
    )
    out = check(tmp_path)
    assert out.returncode == 1, out.stdout
    assert "pkg/mod.py:66: def too_long is 61 lines (over 60)" in out.stdout
    assert "pkg/mod.py:129: class Big is 301 lines (over 300)" in out.stdout
    assert "fits" not in out.stdout


def test_a_method_counts_as_a_function(tmp_path: Path) -> None:
    method = "".join("    " + line + "\n" for line in function("run", 70).splitlines())
    (tmp_path / "tool.py").write_text("class Small:\n" + method)
    out = check(tmp_path)
    assert out.returncode == 1 and "tool.py:2: def run is 70 lines" in out.stdout, out.stdout


def test_tests_generated_code_and_environments_are_left_out(tmp_path: Path) -> None:
    long = function("too_long", 80)
    for rel in ("tests/a.py", "contract_tests/b.py", "gpu_tests/tests/c.py", "pkg/test_d.py",
                "pkg/conftest.py", ".venv-vllm-0.1/lib/e.py", "pkg/__pycache__/f.py"):  # fmt: skip
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(long)
    (tmp_path / "pkg" / "gen.py").write_text("# Generated from pkg/src.py by a script.\n" + long)
    out = check(tmp_path)
    assert out.returncode == 0, out.stdout
    (tmp_path / "pkg" / "src.py").write_text(long)  # the generated file's source counts
    assert check(tmp_path).returncode == 1


def test_without_check_the_report_exits_0(tmp_path: Path) -> None:
    (tmp_path / "mod.py").write_text(function("too_long", 61))
    out = sizes(tmp_path)
    assert out.returncode == 0 and "1 over the limits" in out.stdout, out.stdout
