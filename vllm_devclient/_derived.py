"""Methods derived from typed methods, as descriptors: the blocking client's route methods (from the async
ones, `_sync/routes.py`) and both fleets' client methods (from the client's, `fleet/methods.py`).

Read from a class, a derived method is a real function of that class, made once: the source method's
parameters, so that Python itself binds a call's arguments (a wrong one is its own TypeError naming
`Class.method`, raised at the call, and an awaited method is a coroutine function to `inspect`), the
signature (`__signature__`: the source's annotations, the answer as the subclass gives it) and the
docstring, and a body of one line handing the arguments on, by name, to what the subclass runs. Python
binds arguments only to a function's own parameters, so the function is compiled from its parameter list,
as `dataclasses` compiles an `__init__`. The subclasses' `__get__` overloads say what type checkers see
(a ParamSpec: the source's parameters).
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable
from types import FunctionType, MethodType
from typing import Any, cast

__all__ = ["DerivedMethod", "function_with"]

# The names the compiled body uses besides the parameters.
_RUN, _DEFAULTS = "_run", "_defaults"


def function_with(
    signature: inspect.Signature,
    name: str,
    run: Callable[..., Any],
    *,
    awaits: bool,
    names: dict[str, Any] | None = None,
) -> FunctionType:
    """A function named `name` with `signature`'s parameters (defaults, no annotations) whose body is
    `return run(first, {"p": p, ...}, rest)`, awaited when `awaits` (then it is a coroutine function): the
    first argument (the object) as it is, every named one in a dict, and the `**` parameter's dict (or an
    empty one). A source with positional-only parameters or `*args`, or a parameter of the body's own
    names, is refused (TypeError): no client method has one. `names`: the globals the function sees
    (where `typing.get_type_hints` resolves its annotations)."""
    first, *rest = signature.parameters.values()
    params, named, defaults, spread = [first.name], [], {}, "{}"
    keyword_only = False
    for p in rest:
        if p.kind in (p.POSITIONAL_ONLY, p.VAR_POSITIONAL) or p.name in (_RUN, _DEFAULTS):
            raise TypeError(f"{name}: cannot derive a method from one with the parameter {p}")
        if p.kind is p.VAR_KEYWORD:
            params.append(f"**{p.name}")
            spread = p.name
            continue
        if p.kind is p.KEYWORD_ONLY and not keyword_only:
            params.append("*")
            keyword_only = True
        if p.default is p.empty:
            params.append(p.name)
        else:
            defaults[p.name] = p.default
            params.append(f"{p.name}={_DEFAULTS}[{p.name!r}]")
        named.append(f"{p.name!r}: {p.name}")
    head, wait = ("async def", "await ") if awaits else ("def", "")
    call = f"{_RUN}({first.name}, {{{', '.join(named)}}}, {spread})"
    source = f"{head} {name}({', '.join(params)}):\n    return {wait}{call}\n"
    namespace: dict[str, Any] = {**(names or {}), _RUN: run, _DEFAULTS: defaults}
    exec(compile(source, f"<derived method {name}>", "exec"), namespace)
    return cast(FunctionType, namespace[name])


class DerivedMethod:
    """A method derived from `source`: the same parameters; its signature and docstring are the source's
    unless a subclass says otherwise (`signature`, `doc`), and `runner` says what a call does. Made on first
    use, so that importing a class of derived methods costs a line each."""

    def __init__(self, source: Callable[..., Any]) -> None:
        self.source = source
        self.name: str = source.__name__
        self._made: dict[type, FunctionType] = {}

    def signature(self) -> inspect.Signature:
        return inspect.signature(self.source)

    def doc(self) -> str | None:
        return self.source.__doc__

    def annotations(self, signature: inspect.Signature) -> dict[str, Any]:
        """The source's parameter annotations and the answer as `signature` gives it."""
        source = getattr(self.source, "__annotations__", {})
        out = {k: v for k, v in source.items() if k != "return" and k in signature.parameters}
        if signature.return_annotation is not inspect.Signature.empty:
            out["return"] = signature.return_annotation
        return out

    def runner(self, owner: type[Any]) -> tuple[Callable[..., Any], bool]:
        """(what a call of the method read from `owner` runs, given the object, the named arguments and
        the `**` ones (see `function_with`); whether the method awaits what that answers)."""
        raise NotImplementedError

    def function(self, owner: type[Any]) -> FunctionType:
        """The method as a function of `owner` (made on first use)."""
        made = self._made.get(owner)
        if made is None:
            signature = self.signature()
            run, awaits = self.runner(owner)
            # Annotations are resolved where the source's and the owner's names are.
            names = {**getattr(self.source, "__globals__", {}), **vars(sys.modules[owner.__module__])}
            made = function_with(signature, self.name, run, awaits=awaits, names=names)
            made.__qualname__ = f"{owner.__qualname__}.{self.name}"
            made.__module__ = owner.__module__
            made.__doc__ = self.doc()
            made.__signature__ = signature  # type: ignore[attr-defined]
            made.__annotations__ = self.annotations(signature)
            self._made[owner] = made
        return made

    def bound(self, obj: object | None, owner: type[Any]) -> Any:
        """What `__get__` gives: the function read from the class, a bound method read from an object."""
        function = self._made.get(owner) or self.function(owner)
        return function if obj is None else MethodType(function, obj)
