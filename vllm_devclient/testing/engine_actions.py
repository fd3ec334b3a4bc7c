"""What a script answers an engine call with: :class:`Return`, :class:`Raise`, :class:`Delay`, :class:`Hang`
(the :data:`Action` union), as ``ScriptedEngine.script`` takes them."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeAlias

import msgspec

__all__ = ["Action", "Delay", "Hang", "Raise", "Return", "checked_script"]


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


def checked_script(
    method: str, actions: Action | Iterable[Action], encode: Callable[[Any], bytes]
) -> list[Action]:
    """A script for ``method`` as a list: at least one action, each an :data:`Action` whose value (if any)
    ``encode`` (the engine's msgpack encoder) can send; else a ``ValueError`` or ``TypeError`` saying why."""
    items = [actions] if isinstance(actions, Return | Raise | Delay | Hang) else list(actions)
    if not items:
        raise ValueError(f"script for {method!r} is empty: give at least one action")
    for action in items:
        if not isinstance(action, Return | Raise | Delay | Hang):
            raise TypeError(
                f"script for {method!r}: {action!r} is not an action; "
                "use Return(value), Raise(message), Delay(seconds, value) or Hang()"
            )
        if isinstance(action, Return | Delay):
            try:
                encode(action.value)
            except (TypeError, msgspec.EncodeError) as exc:
                raise TypeError(
                    f"script for {method!r}: {action.value!r} cannot be sent as msgpack ({exc})"
                ) from exc
    return items
