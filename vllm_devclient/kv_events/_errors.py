"""Errors of the KV-events subscriber, under the package's one hierarchy."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from ..errors import DevClientError, InvalidParameterError, WaitTimeoutError

if TYPE_CHECKING:
    from ._events import EventsLost, KVEventBatch, KVEventTally

__all__ = [
    "KVEventSourceError",
    "KVEventsClosedError",
    "KVEventsError",
    "KVEventsLostError",
    "KVEventsTimeoutError",
]


class KVEventsError(DevClientError):
    """Base of the errors raised by vllm_devclient.kv_events."""


class KVEventSourceError(KVEventsError, InvalidParameterError):
    """An endpoint or source cannot be subscribed to as given; the message says what to pass instead."""


@contextmanager
def source_arguments() -> Iterator[None]:
    """The package's argument checks (`vllm_devclient.arguments`), reported as KVEventSourceError."""
    try:
        yield
    except KVEventSourceError:
        raise
    except InvalidParameterError as exc:
        raise KVEventSourceError(str(exc)) from None


class KVEventsTimeoutError(KVEventsError, WaitTimeoutError):
    """A receive or wait deadline passed; `.tally` holds what had been delivered by then."""

    def __init__(self, message: str, *, waited_s: float, tally: KVEventTally) -> None:
        super().__init__(message, waited_s=waited_s, last=tally)
        self.tally = tally


class KVEventsLostError(KVEventsError):
    """Raised instead of delivering a batch that reports losses, when the subscriber has raise_on_loss=True.

    `.batch` is the batch that was not returned (it is delivered to nobody else), `.losses` its losses.
    """

    def __init__(self, batch: KVEventBatch) -> None:
        ranges = ", ".join(
            f"rank {x.rank} seq {x.first_seq}..{x.last_seq} ({x.reason})" for x in batch.losses
        )
        super().__init__(f"KV events lost: {ranges}")
        self.batch = batch
        self.losses: tuple[EventsLost, ...] = batch.losses


class KVEventsClosedError(KVEventsError):
    """The subscriber was closed."""
