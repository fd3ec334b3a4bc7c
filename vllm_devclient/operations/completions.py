"""Completions and engine stepping: the served model (looked up once), a completion, one engine step."""

from __future__ import annotations

from collections.abc import Sequence

from .. import endpoints
from ..arguments import Timeouts
from ..errors import APIConnectionError, DevClientError
from ..models import Completion
from ..routes import endpoint as route
from .bounds import RetryPolicy
from .context import CallContext
from .effects import Operation
from .route_call import call


class ModelCache:
    """The served model's name, looked up once from /v1/models for engine stepping and completions."""

    def __init__(self, model: str | None = None) -> None:
        self.model = model


def served_model(
    cache: ModelCache, *, timeouts: Timeouts, retry: RetryPolicy, ctx: CallContext
) -> Operation[str]:
    """The served model: given at construction, else the first one /v1/models lists (looked up once)."""
    if cache.model is None:
        try:
            listing = yield from call(route("models"), timeouts=timeouts, retry=retry, ctx=ctx)
        except APIConnectionError as exc:  # a timeout too: say why a completion met /v1/models
            exc.args = (f"{exc}, looking up the model for POST /v1/completions (model= skips it)",)
            raise
        if not listing.data:
            raise DevClientError("the server lists no model on /v1/models: pass model= to the client")
        cache.model = listing.data[0].id
    return cache.model


def completion(
    cache: ModelCache,
    prompt: str | Sequence[int],
    *,
    model: str | None,
    max_tokens: int,
    temperature: float,
    seed: int | None,
    stop: Sequence[str] | None,
    timeouts: Timeouts,
    retry: RetryPolicy,
    ctx: CallContext,
    cache_salt: str | None = None,
) -> Operation[Completion]:
    name = (
        model
        if model is not None
        else (yield from served_model(cache, timeouts=timeouts, retry=retry, ctx=ctx))
    )
    ep = endpoints.completion(
        name, prompt, max_tokens=max_tokens, temperature=temperature, seed=seed, stop=stop,
        cache_salt=cache_salt,
    )  # fmt: skip
    done: Completion = yield from call(ep, timeouts=timeouts, retry=retry, ctx=ctx)
    return done


def step_engine(
    cache: ModelCache, *, timeouts: Timeouts, retry: RetryPolicy, ctx: CallContext
) -> Operation[str]:
    """A 1-token greedy completion: makes the engine run one step (and so release finished blocks)."""
    done = yield from completion(
        cache, "0", model=None, max_tokens=1, temperature=0, seed=None, stop=None,
        timeouts=timeouts, retry=retry, ctx=ctx,
    )  # fmt: skip
    return done.text
