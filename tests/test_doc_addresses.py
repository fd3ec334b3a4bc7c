"""No example can send a request into someone's network: the docs, the examples, the package's docstrings and
its CLI help name servers by reserved names (`vllm-0.example`, `*.invalid`, `*.test`) or loopback, never by a
private or public IPv4 address (RFC 5737's documentation ranges are allowed: they route nowhere)."""

from __future__ import annotations

import ipaddress
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SUFFIXES = {".md", ".py", ".json", ".txt", ".toml", ".yaml", ".yml", ".sh"}
# A dotted quad in a host's place: after `//` or `@`, after a host-ish word, or before a port. A version
# (`0.22.0`, `1.2.3.4.post1`) is no dotted quad of its own and has none of these around it.
_QUAD = re.compile(
    r"(?P<pre>//|@|\b(?:host|hostname|address|addr|ip|master_address|url)\W{1,3})?"
    r"(?<![\w.])(?P<ip>\d{1,3}(?:\.\d{1,3}){3})(?![\w.]|\.\d)(?P<port>:\d+)?",
    re.IGNORECASE,
)
_ALLOWED = [
    ipaddress.ip_network(n) for n in ("127.0.0.0/8", "192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24")
]


def leaks(text: str) -> list[str]:
    """Every private or public IPv4 address ``text`` uses as a host (loopback, documentation ranges and the
    unspecified 0.0.0.0, a bind address, are fine)."""
    found = []
    for m in _QUAD.finditer(text):
        if m["pre"] is None and m["port"] is None:
            continue
        try:
            address = ipaddress.IPv4Address(m["ip"])
        except ValueError:
            continue  # 999.1.2.3: no address at all
        if address.is_unspecified or any(address in net for net in _ALLOWED):
            continue
        found.append(m.group(0))
    return found


def _files() -> list[Path]:
    roots = [
        ROOT / "README.md",
        ROOT / "CONTRIBUTING.md",
        ROOT / "docs",
        ROOT / "examples",
        ROOT / "vllm_devclient",
    ]
    out: list[Path] = []
    for root in roots:
        paths = [root] if root.is_file() else sorted(root.rglob("*"))
        out += [p for p in paths if p.is_file() and p.suffix in SUFFIXES and "__pycache__" not in p.parts]
    return out


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('urls = ["http://10.0.0.1:8000", "http://10.0.0.2:8000"]', ["//10.0.0.1:8000", "//10.0.0.2:8000"]),
        ("vllm-devclient --url https://8.8.8.8/v1 health", ["//8.8.8.8"]),
        ("ssh root@172.16.4.2", ["@172.16.4.2"]),
        ("connect to 192.168.1.5:8000", ["192.168.1.5:8000"]),
        ('master_address="100.64.0.7"', ['master_address="100.64.0.7']),
        ("tcp://169.254.1.1:5557", ["//169.254.1.1:5557"]),
        ("http://127.0.0.1:8000 and 127.4.5.6:1 and http://0.0.0.0:8000", []),
        ("http://192.0.2.10:8000, 198.51.100.7:80, 203.0.113.255:443", []),
        ("vLLM 0.22.0 and 0.33.0; version 1.2.3.4 of a tool; 10.0.0.1 in prose", []),
        ("http://vllm-0.example:8000 and http://vllm-1.invalid:8000", []),
        ("http://300.1.2.3:80", []),
    ],
)
def test_the_check_finds_addresses_in_host_places_only(text: str, expected: list[str]) -> None:
    assert leaks(text) == expected


def test_no_doc_example_or_help_text_names_a_private_or_public_address() -> None:
    files = _files()
    assert ROOT / "README.md" in files and any(p.parent.name == "examples" for p in files)
    bad = {
        f"{path.relative_to(ROOT)}:{text[: m.start()].count(chr(10)) + 1}": hit
        for path in files
        for text in [path.read_text(encoding="utf-8", errors="replace")]
        for hit in leaks(text)
        for m in [re.search(re.escape(hit), text)]
        if m is not None
    }
    assert not bad, f"use a reserved name (http://vllm-0.example:8000) or 127.0.0.1 instead: {bad}"
