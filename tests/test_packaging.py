"""The package as pip sees it, from pyproject.toml and the sdist's manifest (the built artefacts themselves
are checked by scripts/check_dist.py, `make dist-check`)."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
TEST_ONLY = {
    "pytest",
    "tokenizers",
    "huggingface_hub",
    "huggingface-hub",
    "respx",
    "pytest-asyncio",
    "cryptography",
}


@pytest.fixture(scope="module")
def project() -> dict[str, Any]:
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    data: dict[str, Any] = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return data


def _names(requirements: list[str]) -> set[str]:
    return {re.split(r"[<>=!~\[; ]", r, maxsplit=1)[0].lower() for r in requirements}


def _closure(extras: dict[str, list[str]], extra: str) -> set[str]:
    """The distributions an extra pulls in, following the package's references to its own extras."""
    out: set[str] = set()
    for requirement in extras[extra]:
        own = re.fullmatch(r"vllm-devclient\[([^\]]+)\]", requirement)
        if own:
            for sub in own.group(1).split(","):
                out |= _closure(extras, sub.strip())
        else:
            out |= _names([requirement])
    return out


def test_licence_is_an_spdx_expression_with_its_file(project: dict[str, Any]) -> None:
    meta = project["project"]
    assert meta["license"] == "Apache-2.0" and meta["license-files"] == ["LICENSE"]
    text = (ROOT / "LICENSE").read_text()
    assert text.lstrip().startswith("Apache License") and "Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text
    assert not any(c.startswith("License ::") for c in meta["classifiers"])  # PEP 639: the expression only
    assert meta["urls"] and any(
        c.startswith("Programming Language :: Python :: 3.10") for c in meta["classifiers"]
    )


def test_all_brings_no_test_only_package_and_dev_has_the_release_tools(project: dict[str, Any]) -> None:
    extras = project["project"]["optional-dependencies"]
    everything = _closure(extras, "all")
    assert not everything & TEST_ONLY, everything & TEST_ONLY
    assert {"click", "rich", "pyzmq", "msgspec", "prometheus_client", "tqdm"} <= everything
    assert {"pytest", "cryptography"} <= _closure(extras, "testing")
    assert {"jsonschema", "build", "twine"} <= _closure(extras, "dev")


HTTP_STACKS = {"httpx", "httpx2", "aiohttp"}


def test_a_core_install_needs_no_http_stack_but_h11_and_each_is_an_extra(project: dict[str, Any]) -> None:
    """The default path is the SDK's own h11 pools: httpx, httpx2 and aiohttp are extras of their own name,
    all three in [all] (tests/test_optional_stacks.py checks that the default path imports none of them)."""
    core = _names(project["project"]["dependencies"])
    assert "h11" in core and not core & (HTTP_STACKS | {"httpcore", "httpcore2", "requests", "anyio"}), core
    extras = project["project"]["optional-dependencies"]
    for stack in sorted(HTTP_STACKS):
        assert _names(extras[stack]) == {stack}, extras[stack]
    assert HTTP_STACKS <= _closure(extras, "all")


def test_the_pytest_plugin_is_opt_in(project: dict[str, Any]) -> None:
    assert "pytest11" not in project["project"].get("entry-points", {})
    assert project["project"]["scripts"] == {"vllm-devclient": "vllm_devclient.cli:main"}
    conftest = (ROOT / "conftest.py").read_text()
    assert 'pytest_plugins = ["vllm_devclient.testing.pytest_plugin"]' in conftest
    assert "cli/schema.json" in project["tool"]["setuptools"]["package-data"]["vllm_devclient"]
    # The GSM8K sample the tests (and `gsm8k --sample`) read ships with its license.
    assert "data/gsm8k_sample/*" in project["tool"]["setuptools"]["package-data"]["vllm_devclient"]


def test_the_sdist_carries_what_its_tests_read() -> None:
    manifest = (ROOT / "MANIFEST.in").read_text().split()
    for needed in (
        "tests",
        "rust_fixtures",
        "benchmarks",
        "docs",
        "scripts",
        "requirements",
        "conftest.py",
        "LICENSE",
    ):
        assert needed in manifest, needed


def test_an_sdist_skips_only_what_needs_the_checkouts_setup() -> None:
    # By its path: "conftest" in sys.modules may be another suite's.
    spec = importlib.util.spec_from_file_location("root_conftest", ROOT / "conftest.py")
    assert spec is not None and spec.loader is not None
    root = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(root)
    from vllm_devclient.gsm8k import GSM8KDataError
    from vllm_devclient.testing.frontends import VllmNotInstalledError

    # In a checkout (no PKG-INFO) a missing vLLM fails the tests; only an unpacked sdist skips them.
    assert root.SDIST is (ROOT / "PKG-INFO").is_file()
    assert (
        root.missing_setup(VllmNotInstalledError("no vllm"))
        == "needs vLLM (a checkout's `make setup` installs it)"
    )
    try:
        try:
            raise VllmNotInstalledError("no vllm")
        except VllmNotInstalledError:
            raise AssertionError("Regex pattern did not match.")  # noqa: B904  # as pytest.raises(match=) does
    except AssertionError as wrapped:
        assert root.missing_setup(wrapped) is not None
    # The GSM8K tests read the package's sample: a missing data folder is a real failure, never a skip.
    assert root.missing_setup(GSM8KDataError("/x/shared/data/gsm8k/train.jsonl does not exist")) is None
    assert root.missing_setup(FileNotFoundError(2, "No such file", "/x/shared/data/gsm8k/test.jsonl")) is None
    assert root.missing_setup(FileNotFoundError(2, "No such file", "/x/other")) is None
    assert root.missing_setup(AssertionError("a real failure")) is None


def test_the_readme_names_every_core_dependency(project: dict[str, Any]) -> None:
    """README's `pip install vllm-devclient` line says what a core install pulls in: all of it."""
    line = next(
        line
        for line in (ROOT / "README.md").read_text().splitlines()
        if line.startswith("pip install vllm-devclient ")
    )
    said = line.partition("#")[2].lower()
    core = _names(project["project"]["dependencies"]) - {"typing_extensions"}
    assert {name for name in core if name not in said} == set(), line
