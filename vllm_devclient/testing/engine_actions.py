"""What a script answers an engine call with: :class:`Return`, :class:`Raise`, :class:`Delay`, :class:`Hang`
(the :data:`Action` union), as ``ScriptedEngine.script`` takes them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeAlias

__all__ = ["Action", "Delay", "Hang", "Raise", "Return"]


@dataclass(frozen=True)
class Return:
    """Answer the call with ``value`` (must be msgpack-encodable)."""

    value: Any = None


@dataclass(frozen=True)
class Raise:
    """Fail the call; the frontend sees ``Call to <method> method failed: <message>``."""

    message: str


@dataclass(frozen=True)
class Delay:
    """Answer with ``value`` after ``seconds``."""

    seconds: float
    value: Any = None


@dataclass(frozen=True)
class Hang:
    """Never answer the call (neither frontend times it out; the HTTP client must)."""


Action: TypeAlias = Return | Raise | Delay | Hang
