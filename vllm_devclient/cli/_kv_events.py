"""`vllm-devclient kv-events tail`: KV-cache event batches as they arrive.

`-o json` prints JSON Lines: one line per batch (the batch's fields plus `"schema": 1`), then the envelope
(`"command": "kv-events tail"`, the tally in `result`) as the last line.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

import click

from ..client import DevClient
from ..errors import DevClientError, WaitTimeoutError
from ._envelope import SCHEMA_VERSION, envelope, rounded
from ._exit import ExitCode, UnsuccessfulResultError, exit_code_for
from ._generate import SUBCOMMAND_EPILOG
from ._run import CommandError, Unavailable
from ._settings import Settings, global_options, settings_of, split_globals

__all__ = ["kv_events"]

COMMAND = "kv-events tail"


@click.group("kv-events", context_settings={"help_option_names": ["-h", "--help"]})
def kv_events() -> None:
    """KV-cache events published by the engine (the [zmq] extra)."""


def _hashes(hashes: Sequence[int | bytes], shown: int = 3) -> str:
    text = [h.hex()[:16] if isinstance(h, bytes) else f"{h:x}" for h in hashes[:shown]]
    more = f" +{len(hashes) - shown}" if len(hashes) > shown else ""
    return f"{len(hashes)} block{'s' if len(hashes) != 1 else ''} [{', '.join(text)}{more}]"


def _batch_line(batch: Any) -> str:
    """One human line per batch: what was stored, removed or cleared, per medium."""
    from ..kv_events import AllBlocksCleared, BlockRemoved, BlockStored

    parts: list[str] = []
    for event in batch.events:
        if isinstance(event, BlockStored):
            parts.append(f"stored {event.medium or '-'} {_hashes(event.block_hashes)}")
        elif isinstance(event, BlockRemoved):
            parts.append(f"removed {event.medium or '-'} {_hashes(event.block_hashes)}")
        elif isinstance(event, AllBlocksCleared):
            parts.append("all blocks cleared")
        else:
            parts.append(f"unknown event {getattr(event, 'type', None)!r}")
    flag = " (replayed)" if batch.replayed else ""
    return f"rank {batch.rank} seq {batch.seq}{flag}: " + ("; ".join(parts) or "no events")


def _subscriber(settings: Settings, ctx: click.Context, **kw: Any) -> Any:
    try:
        from ..kv_events import KVEventSourceError, KVEventSubscriber
    except ImportError as exc:
        raise Unavailable(exc, "zmq") from exc
    endpoint = kw.pop("endpoint")
    if endpoint is not None:
        try:
            return KVEventSubscriber(endpoint, **kw)
        except KVEventSourceError as exc:
            raise click.UsageError(str(exc), ctx) from exc
    if len(settings.urls) != 1:
        raise click.UsageError("kv-events tail follows one server: give one --url, or --endpoint", ctx)
    with DevClient(
        settings.urls[0],
        api_key=settings.api_key,
        timeout=settings.http_timeout,
        total_timeout=settings.total_timeout,
        max_retries=settings.retries,
        verify=settings.verify,
        cert=settings.cert,
    ) as client:
        try:
            return KVEventSubscriber.from_client(client, backlog=kw["backlog"])
        except KVEventSourceError as exc:
            raise CommandError(f"{client.base_url}: {exc}", error=exc) from exc
        except DevClientError as exc:
            message = f"{client.base_url}: {type(exc).__name__}: {exc}"
            raise CommandError(message, exit_code=exit_code_for(exc), error=exc) from exc


@kv_events.command("tail", epilog=SUBCOMMAND_EPILOG)
@click.option("--endpoint", help="Rank 0's publisher (tcp://host:port). Default: ask the server (one --url).")
@click.option("--replay-endpoint", help="Rank 0's replay socket, with --endpoint.")
@click.option("--topic", default="", help="Topic, with --endpoint.")
@click.option(
    "--data-parallel-size", type=click.IntRange(min=1), default=1, show_default=True, help="Ranks to follow."
)
@click.option("--count", type=click.IntRange(min=1), default=None, help="Stop after this many batches.")
@click.option(
    "--deadline",
    type=click.FloatRange(min=0, min_open=True),
    metavar="SECONDS",
    default=None,
    help="Stop after this many seconds (exit 4 when --count batches did not arrive by then).",
)
@click.option(
    "--backlog/--no-backlog", default=True, show_default=True, help="Replay what is buffered first."
)
@global_options(top=False)
def _tail(
    endpoint: str | None,
    replay_endpoint: str | None,
    topic: str,
    data_parallel_size: int,
    count: int | None,
    deadline: float | None,
    backlog: bool,
    **common: Any,
) -> None:
    """Print KV-cache event batches as they arrive.

    Stops after --count batches, at --deadline, or at Ctrl-C (a normal end here). Exit 4 when the deadline
    passed before --count batches arrived, 1 when batches were lost (not recoverable by replay).
    """
    ctx = click.get_current_context()
    settings = settings_of(ctx, split_globals(common))
    start = time.perf_counter()
    kw: dict[str, Any] = {"endpoint": endpoint, "backlog": backlog}
    if endpoint is not None:
        kw.update(replay_endpoint=replay_endpoint, topic=topic, data_parallel_size=data_parallel_size)
    sub = _subscriber(settings, ctx, **kw)
    received = 0
    stop_at = None if deadline is None else time.monotonic() + deadline
    with sub:
        try:
            while count is None or received < count:
                left = None if stop_at is None else stop_at - time.monotonic()
                if left is not None and left <= 0:
                    break
                # Short slices: Ctrl-C is seen at once, not when the next batch arrives.
                batch = sub.poll(0.25 if left is None else min(0.25, left))
                if batch is None:
                    continue
                received += 1
                _print_batch(batch, settings)
        except KeyboardInterrupt:
            pass
        tally = sub.tally
    code = ExitCode.FAILED if tally.lost_batches else ExitCode.OK
    if count is not None and received < count:
        code = ExitCode.DEADLINE
    _finish(settings, tally, received, code, time.perf_counter() - start)
    ctx.exit(code)


def _print_batch(batch: Any, settings: Settings) -> None:
    import msgspec

    for lost in batch.losses:
        click.secho(
            f"lost: rank {lost.rank} batches {lost.first_seq}..{lost.last_seq} ({lost.reason})",
            err=True,
            fg="red",
        )
    if batch.restart is not None:
        click.secho(f"publisher of rank {batch.rank} restarted", err=True, fg="yellow")
    if settings.json:
        data = rounded(msgspec.to_builtins(batch))
        click.echo(json.dumps({"schema": SCHEMA_VERSION, **data}, separators=(",", ":")))
    elif settings.output == "tsv":
        events = _batch_line(batch).partition(": ")[2]
        click.echo(f"{batch.rank}\t{batch.seq}\t{str(batch.replayed).lower()}\t{events}")
    else:
        click.echo(_batch_line(batch))


def _finish(settings: Settings, tally: Any, received: int, code: int, elapsed: float) -> None:
    stored = ", ".join(f"{m or '-'} {n}" for m, n in tally.stored_blocks.items()) or "0"
    removed = ", ".join(f"{m or '-'} {n}" for m, n in tally.removed_blocks.items()) or "0"
    click.echo(
        f"{received} batches; blocks stored: {stored}; removed: {removed}; cleared: {tally.cleared}; "
        f"lost batches: {tally.lost_batches}",
        err=True,
    )
    if settings.json:
        result = {
            "batches": received,
            "stored_blocks": {m or "-": n for m, n in tally.stored_blocks.items()},
            "removed_blocks": {m or "-": n for m, n in tally.removed_blocks.items()},
            "cleared": tally.cleared,
            "lost_batches": tally.lost_batches,
        }
        error: Exception | None = None
        if code == ExitCode.DEADLINE:
            error = WaitTimeoutError(f"only {received} batches arrived before the deadline", waited_s=elapsed)
        elif code != ExitCode.OK:
            error = UnsuccessfulResultError(f"{tally.lost_batches} batches were lost")
        doc = envelope(COMMAND, elapsed_s=elapsed, result=result, error=error, exit_code=code)
        click.echo(json.dumps(doc, separators=(",", ":")))
