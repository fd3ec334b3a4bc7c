"""The `vllm-devclient` group: global options, a help page that fits a screen, the method names as aliases,
and every error of the command as a whole (usage, missing extra, Ctrl-C) as one line, or as the JSON
envelope under `-o json`."""

from __future__ import annotations

import contextlib
import json
import sys
import textwrap
import time
from collections.abc import Iterator, Sequence
from typing import Any, TextIO

import click

from .._version import __version__
from ..errors import InvalidParameterError
from ._envelope import dumps, envelope
from ._exit import EXIT_CODES_SHORT, ExitCode
from ._generate import CATEGORIES, method_commands
from ._run import CommandError
from ._settings import SECRETS, global_options, redact

__all__ = ["cli", "run"]

JSON_LINES = frozenset({"kv-events tail"})


class DevGroup(click.Group):
    """Commands listed by category in `--help`; aliases (the SDK's method names) that resolve to their
    command; SDK argument errors reported as usage errors; JSON for every error under `-o json`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.aliases: dict[str, str] = {}
        self.categories: dict[str, str] = {}

    def add(self, command: click.Command, category: str, aliases: Sequence[str] = ()) -> None:
        assert command.name is not None
        self.add_command(command)
        self.categories[command.name] = category
        self.aliases.update(dict.fromkeys(aliases, command.name))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        return super().get_command(ctx, self.aliases.get(cmd_name, cmd_name))

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        # The canonical name, also when an alias was typed (so `--json` output names the command).
        name, command, rest = super().resolve_command(ctx, args)
        return (command.name if command is not None else name), command, rest

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        by_category: dict[str, list[str]] = {}
        for name in self.commands:  # in the order they were added
            command = self.get_command(ctx, name)
            if command is None or command.hidden:
                continue
            by_category.setdefault(self.categories.get(name, "more"), []).append(name)
        width = max(formatter.width - formatter.current_indent - 11, 30)
        with formatter.section(f"Commands ({ctx.command_path} COMMAND -h for each)"):
            for category in dict.fromkeys((*CATEGORIES, *by_category)):
                names = " ".join(by_category.get(category, ()))
                lines = textwrap.wrap(names, width, break_on_hyphens=False, break_long_words=False)
                for i, line in enumerate(lines):
                    formatter.write(
                        f"{'':>{formatter.current_indent}}{category if i == 0 else '':<9}{line}\n"
                    )

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            raise CommandError(
                "interrupted", exit_code=ExitCode.INTERRUPTED, error=KeyboardInterrupt()
            ) from None
        except InvalidParameterError as exc:
            raise click.UsageError(str(exc), ctx) from exc

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        argv = list(sys.argv[1:] if args is None else args)
        if not standalone_mode:
            return super().main(argv, prog_name, complete_var, standalone_mode=False, **extra)
        with _redacted_output():
            self._main(argv, prog_name, complete_var, **extra)

    def _main(self, argv: list[str], prog_name: str | None, complete_var: str | None, **extra: Any) -> None:
        start = time.perf_counter()
        try:
            code = super().main(argv, prog_name, complete_var, standalone_mode=False, **extra)
        except click.ClickException as exc:
            code = exc.exit_code
            if wants_json(argv):
                error: BaseException = (
                    exc.error
                    if isinstance(exc, CommandError)
                    else InvalidParameterError(exc.format_message())
                )
                doc = envelope(
                    self._command_in(argv),
                    elapsed_s=time.perf_counter() - start,
                    error=error,
                    error_message=exc.format_message(),
                    exit_code=code,
                )
                # JSON Lines commands (kv-events tail) end with the envelope on one line.
                click.echo(json.dumps(doc) if doc["command"] in JSON_LINES else dumps(doc))
                click.echo(f"error: {exc.format_message()}", err=True)
            elif isinstance(exc, CommandError):
                click.secho(f"error: {exc.format_message()}", err=True, fg="red")
            else:
                exc.show()
        except click.Abort:
            click.echo("interrupted", err=True)
            code = ExitCode.INTERRUPTED
        sys.exit(code if isinstance(code, int) else 0)

    def _command_in(self, argv: Sequence[str]) -> str | None:
        """The command path the command line names (`kv-events tail`), read without click."""
        group: click.Group = self
        path: list[str] = []
        for token in argv:
            name = self.aliases.get(token, token) if group is self else token
            command = group.commands.get(name)
            if command is None:
                continue
            path.append(name)
            if not isinstance(command, click.Group):
                break
            group = command
        return " ".join(path) or None


class _Redacting:
    """A text stream that writes through to `stream` with every secret replaced by ***; everything else
    (flush, isatty, fileno, encoding, ...) is the stream's own."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(redact(text))
        return len(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


@contextlib.contextmanager
def _redacted_output() -> Iterator[None]:
    """stdout and stderr with the API key and URL passwords masked, whoever writes (click, rich, tools)."""
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = _Redacting(sys.stdout), _Redacting(sys.stderr)
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved
        SECRETS.clear()


def wants_json(argv: Sequence[str]) -> bool:
    """Whether the command line asks for JSON (read without click, for errors click raises while parsing)."""
    args = list(argv[: argv.index("--")] if "--" in argv else argv)
    for i, token in enumerate(args):
        if token in ("--json", "-ojson", "--output=json"):
            return True
        if token in ("-o", "--output") and i + 1 < len(args) and args[i + 1] == "json":
            return True
    return False


@click.group(
    cls=DevGroup,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
    epilog=EXIT_CODES_SHORT,
)
@global_options(top=True)
@click.version_option(__version__, "-V", "--version", prog_name="vllm-devclient")
def cli(**_: Any) -> None:
    """Drive vLLM's development-mode endpoints, on one server or a fleet.

    \b
    vllm-devclient parity         # Python vs Rust frontend, scripted engine
    vllm-devclient --url http://vllm-0.example:8000 --url http://vllm-1.example:8000 barrier -o json
    """


def _register() -> None:
    from . import _kv_events, _support, _tools

    group = cli
    assert isinstance(group, DevGroup)
    for command, category, aliases in method_commands():
        group.add(command, category, aliases)
    for command in (*_tools.COMMANDS, _kv_events.kv_events):
        group.add(command, "tools")
    # What a server's release serves, from the shipped matrix (no server asked): listed with the server's.
    group.add(_support.support, "server")


_register()


def run(argv: Sequence[str] | None = None) -> None:
    cli.main(args=argv, prog_name="vllm-devclient")
