"""What a release's two frontends do in the kit, read from the frontends themselves (no judging here)."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx

from tools.fixtures.releases import release_pool

__all__ = ["FrontendSurvey", "Survey", "survey"]

# A method no dev route takes: a path answering it 405 exists (with other methods), 404 does not.
_PROBE_METHOD = "PATCH"
# Paths worth asking vllm-rs about: every path its binary names.
_PATH = re.compile(rb"/(?:v1/)?[a-z][a-z_]*(?:/[a-z][a-z_]*)?")


@dataclass
class FrontendSurvey:
    """One frontend of one release: started or not (`error`, `log_tail`), the engine utilities it called
    while starting, and the paths it serves (`routes`: path -> methods, where the frontend says them)."""

    frontend: str
    started: bool
    error: str | None = None
    log_tail: str = ""
    startup_utilities: list[str] = field(default_factory=list)
    routes: dict[str, list[str]] = field(default_factory=dict)
    route_source: str = ""


@dataclass
class Survey:
    version: str
    frontends: dict[str, FrontendSurvey]

    def as_json(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "frontends": {k: dataclasses.asdict(v) for k, v in self.frontends.items()},
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Survey:
        fronts = {k: FrontendSurvey(**v) for k, v in data["frontends"].items()}
        return cls(str(data["version"]), fronts)


def _openapi_routes(base_url: str) -> dict[str, list[str]] | None:
    """The FastAPI app's own route table, or None when the app does not publish it."""
    answer = httpx.get(f"{base_url}/openapi.json", timeout=30)
    if answer.status_code != 200:
        return None
    paths = answer.json().get("paths", {})
    return {path: sorted(m.upper() for m in methods) for path, methods in sorted(paths.items())}


def _probed_routes(base_url: str, candidates: Iterable[str]) -> dict[str, list[str]]:
    """The candidate paths the server serves, asked with a method no route takes (405: served)."""
    served: dict[str, list[str]] = {}
    with httpx.Client(base_url=base_url, timeout=30) as client:
        for path in sorted(set(candidates)):
            answer = client.request(_PROBE_METHOD, path)
            if answer.status_code != 404:
                allow = answer.headers.get("allow", "")
                served[path] = sorted(m.strip() for m in allow.split(",") if m.strip())
    return served


def binary_paths(binary: str) -> set[str]:
    """Every route-like path the vllm-rs binary's bytes name (a superset: probing tells which are routes).
    A last segment of one or two letters is a fragment of packed strings, which a route with a path
    parameter (`/v1/responses/{id}`) would answer as served."""
    with open(binary, "rb") as f:
        data = f.read()
    return {path for m in _PATH.findall(data) if len((path := m.decode()).rsplit("/", 1)[-1]) > 2}


def _one(fe: Any, candidates: Sequence[str]) -> FrontendSurvey:
    out = FrontendSurvey(fe.frontend, started=True)
    out.startup_utilities = sorted({c.method for c in fe.startup_calls if c.kind == "utility"})
    routes = _openapi_routes(fe.base_url) if fe.frontend == "python" else None
    if routes is not None:
        out.routes, out.route_source = routes, "/openapi.json"
    else:
        out.routes, out.route_source = _probed_routes(fe.base_url, candidates), f"{_PROBE_METHOD} probes"
    return out


def survey(
    version: str, *, python: str, vllm_rs: str, frontends: Sequence[str], candidates: Iterable[str]
) -> Survey:
    """Start each frontend of `version` alone, in the kit, and read what it is."""
    found: dict[str, FrontendSurvey] = {}
    paths = sorted(set(candidates) | binary_paths(vllm_rs))
    for name in frontends:
        pool = release_pool(version, python=python, vllm_rs=vllm_rs, frontends=[name])
        try:
            fe = pool.get(name)
        except Exception as exc:  # the report shows why it did not start
            tail = "".join(f.log_tail(30) for f in pool.running())
            found[name] = FrontendSurvey(name, started=False, error=str(exc)[-2000:], log_tail=tail)
            pool.close()
            continue
        try:
            found[name] = _one(fe, paths)
        finally:
            pool.close()
    return Survey(version, found)
