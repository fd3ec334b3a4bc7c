"""`vllm-devclient support`: which vLLM release serves which route, on each frontend, from the support
matrix the package ships (`vllm_devclient.support`, drawn from the recorded fixtures)."""

from __future__ import annotations

import time
from typing import Any

import click

from ..support import load_support, markdown
from ._exit import ExitCode
from ._generate import SUBCOMMAND_EPILOG
from ._settings import global_options, settings_of, split_globals

__all__ = ["support"]


@click.command("support", epilog=SUBCOMMAND_EPILOG)
@click.option(
    "--frontend",
    "frontends",
    type=click.Choice(["python", "rust"]),
    multiple=True,
    help="Only this frontend (repeatable).  [default: both]",
)
@click.option(
    "--route", "routes", multiple=True, help='Only this route, "METHOD /path" or "/path" (repeatable).'
)
@global_options(top=False)
def support(frontends: tuple[str, ...], routes: tuple[str, ...], **common: Any) -> None:
    """Route x release x frontend: served, absent (404/405) or differs (how), from the recordings. No
    server is asked; -o json gives the matrix as data (its `format` is the data's version)."""
    ctx = click.get_current_context()
    settings = settings_of(ctx, split_globals(common))
    start = time.perf_counter()
    matrix = load_support()
    chosen_frontends = list(frontends) or list(matrix.frontends)
    chosen = [r for r in matrix.routes if not routes or any(_matches(r, want) for want in routes)]
    unknown = [want for want in routes if not any(_matches(r, want) for r in matrix.routes)]
    if unknown:
        known = ", ".join(matrix.routes)
        raise click.BadParameter(f"no recorded route {unknown[0]!r} (known: {known})", param_hint="--route")
    data = dict(matrix.raw)
    data["frontends"] = chosen_frontends
    data["routes"] = {r: {fe: matrix.raw["routes"][r][fe] for fe in chosen_frontends} for r in chosen}
    if settings.json:
        from ._envelope import dumps, envelope

        doc = envelope("support", elapsed_s=time.perf_counter() - start, result=data, exit_code=ExitCode.OK)
        click.echo(dumps(doc))
    else:
        from ..support import parse

        shown = parse(data)
        for frontend in chosen_frontends:
            click.echo(f"## {frontend} frontend\n")
            click.echo(markdown(shown, frontend) + "\n")
    ctx.exit(ExitCode.OK)


def _matches(route: str, want: str) -> bool:
    want = want.strip()
    return route == want or route.split(" ", 1)[1] == want
