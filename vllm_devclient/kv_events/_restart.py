"""After a publisher restart: which held live batches are the old publisher's (read late) and which the new
one's (see "On a restart" in `_stream.py`'s docstring). No state here: a function of what the rank holds."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field


@dataclass(slots=True)
class Attribution:
    # The old publisher's batches to deliver, seq -> (payload, replayed): its replayed batches at or above
    # the old `expected`, and its late live ones.
    old: dict[int, tuple[bytes, bool]] = field(default_factory=dict)
    new: deque[tuple[int, bytes]] = field(default_factory=deque)  # the new publisher's, not in its replay
    first_new: int = -1  # the new publisher's first live batch held; -1: none
    copies: int = 0  # held batches dropped as copies of batches delivered otherwise


def attribute(
    held: Iterable[tuple[int, bytes]],
    fresh: Mapping[int, bytes],
    cache: Mapping[int, bytes],
    old_expected: int,
    mark: int,
) -> Attribution:
    """Tell the held live batches apart by (seq, payload), in arrival order.

    `fresh` is what the new publisher's replay brought (empty when it was not asked or not answered), `cache`
    the old publisher's replayed batches, `mark` how many batches were held when the new publisher was asked
    (0 when its replay did not answer completely).
    """
    out = Attribution(old={seq: (payload, True) for seq, payload in cache.items() if seq >= old_expected})
    fresh_max = max(fresh) if fresh else -1
    for i, (seq, payload) in enumerate(held):
        theirs = fresh.get(seq)
        if theirs == payload:
            out.copies += 1  # the new publisher's, delivered from its replay
            is_new = True
        elif theirs is not None:
            is_new = False
        elif seq > fresh_max:
            is_new = i >= mark  # published after the new publisher answered
        else:  # below the replay's first: rolled out of the new publisher's buffer, or the old one's
            is_new = seq < old_expected
        if is_new:
            if out.first_new < 0:
                out.first_new = seq
            if theirs != payload:
                out.new.append((seq, payload))
        elif seq >= old_expected and seq not in out.old:
            out.old[seq] = (payload, False)
        else:
            out.copies += 1  # a second copy of an old batch already accounted for
    if out.first_new < 0 and fresh:
        out.first_new = min(fresh)
    return out
