"""A type, or a default, back to the source text that names it, and the imports that text needs."""

from __future__ import annotations

import collections.abc
import types
import typing
from typing import Any

from . import GenerateError


class Imports:
    """What a generated module imports for the types it names."""

    def __init__(self) -> None:
        self.typing: set[str] = set()
        self.abc: set[str] = set()
        self.package: dict[str, set[str]] = {}  # module (relative to the package) -> names
        self.modules: set[str] = set()  # imported whole (httpx)

    def lines(self, *, runtime: tuple[str, ...], package: str = "..") -> tuple[list[str], list[str]]:
        """(imports at run time, imports for type checkers only): the package's `runtime` modules load
        anyway; any other (metrics) only for annotations. `package`: the package, relative to the module."""
        now: list[str] = []
        later: list[str] = []
        if self.abc:
            now.append(f"from collections.abc import {', '.join(sorted(self.abc))}")
        later += [f"import {module}" for module in sorted(self.modules)]
        for module, names in sorted(self.package.items()):
            line = f"from {package}{module} import {', '.join(sorted(names))}"
            (now if module in runtime else later).append(line)
        names = self.typing | ({"TYPE_CHECKING"} if later else set())
        if names:
            now.append(f"from typing import {', '.join(sorted(names))}")
        return now, later


def source(tp: Any, imports: Imports) -> str:
    """A type as the source text that names it."""
    if tp is None or tp is type(None):
        return "None"
    if tp is Any:
        imports.typing.add("Any")
        return "Any"
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        return " | ".join(source(a, imports) for a in args)
    if origin is typing.Literal:
        imports.typing.add("Literal")
        return f"Literal[{', '.join(repr(a) for a in args)}]"
    if origin is collections.abc.Callable:
        imports.abc.add("Callable")
        params, ret = args
        return f"Callable[[{', '.join(source(a, imports) for a in params)}], {source(ret, imports)}]"
    if origin is not None:
        return f"{_named(origin, imports)}[{', '.join(source(a, imports) for a in args)}]"
    if isinstance(tp, type):
        return _named(tp, imports)
    raise GenerateError(f"cannot name the type {tp!r} in generated code")


def _named(cls: type, imports: Imports) -> str:
    if cls.__module__ == "builtins":
        return cls.__name__
    if cls.__module__ == "collections.abc":
        imports.abc.add(cls.__name__)
        return cls.__name__
    if cls.__module__.split(".")[0] == "httpx":
        imports.modules.add("httpx")
        return f"httpx.{cls.__name__}"
    if cls.__module__.startswith("vllm_devclient."):
        imports.package.setdefault(cls.__module__.removeprefix("vllm_devclient."), set()).add(cls.__name__)
        return cls.__name__
    raise GenerateError(
        f"{cls.__module__}.{cls.__name__}: a route's types come from the package or the stdlib"
    )


def value(default: Any) -> str:
    if isinstance(default, bool | int | float | str | type(None)) or default == ():
        return repr(default)
    raise GenerateError(f"a default must be a plain value, got {default!r}")
