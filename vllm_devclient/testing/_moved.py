"""Names that moved to another module keep working from the old one for a release, with a warning."""

from __future__ import annotations

import warnings
from types import ModuleType
from typing import Any


def moved(old: str, name: str, new: ModuleType) -> Any:
    """`new.name` for a module-level `__getattr__` of module `old`, with a DeprecationWarning; an
    AttributeError for a name `new` does not export."""
    if name not in getattr(new, "__all__", ()):
        raise AttributeError(f"module {old!r} has no attribute {name!r}")
    warnings.warn(
        f"{old}.{name} moved to {new.__name__}.{name}; the old name goes in the next release",
        DeprecationWarning,
        stacklevel=3,
    )
    return getattr(new, name)
