"""The global options (shown once, on the group; also accepted after the subcommand, where they win) and the
settings every subcommand runs with."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypeVar
from urllib.parse import urlsplit

import click
from click.core import ParameterSource

from .._base_client import NOT_GIVEN, TIMEOUT_ENV, TOTAL_TIMEOUT_ENV, NotGiven
from ..constants import DEFAULT_MAX_CONCURRENCY, DEFAULT_TIMEOUT, DEFAULT_URL
from ..fleet import AsyncFleet, TargetOutcome
from ..timeouts import Timeout
from ..transports import CertArg, VerifyArg

if TYPE_CHECKING:
    ParamTypeBase = click.ParamType[Any]
else:  # click < 8.2: ParamType is not generic at run time
    ParamTypeBase = click.ParamType

__all__ = [
    "GLOBAL_OPTIONS",
    "SECONDS",
    "Number",
    "Output",
    "ParamTypeBase",
    "Settings",
    "global_options",
    "global_params",
    "keep_secret",
    "normalise_url",
    "redact",
    "settings_of",
    "split_globals",
]

F = TypeVar("F", bound=Callable[..., Any])
Output = Literal["table", "json", "tsv"]
GLOBAL_OPTIONS = (
    "urls",
    "api_key",
    "cacert",
    "cert",
    "key",
    "insecure",
    "timeout",
    "total_timeout",
    "retries",
    "concurrency",
    "output",
    "as_json",
    "no_progress",
)


# What the command line must never print: the API key and passwords in URLs (a server may echo them).
SECRETS: set[str] = set()


def keep_secret(value: str | None) -> None:
    for text in (value, (value or "").strip()):
        if text and len(text) >= 4:
            SECRETS.add(text)


def redact(text: str) -> str:
    for secret in SECRETS:
        text = text.replace(secret, "***")
    return text


def normalise_url(url: str) -> str:
    """A base URL as the fleet wants it: no trailing slash, and no `/v1` (dev routes live at the root)."""
    url = url.rstrip("/")
    return url[: -len("/v1")] if url.endswith("/v1") else url


@dataclass(frozen=True)
class Settings:
    urls: tuple[str, ...]
    urls_given: bool  # on the command line (not from VLLM_DEVCLIENT_URL or the default)
    api_key: str | None = field(repr=False)
    timeout: float
    # --timeout or $VLLM_DEVCLIENT_TIMEOUT: it bounds every call (long routes too) and each try of a wait
    timeout_given: bool
    retries: int
    concurrency: int
    output: Output
    progress: bool
    verify: VerifyArg = True  # --cacert, --insecure
    cert: CertArg | None = None  # --cert, --key
    # --total-timeout or $VLLM_DEVCLIENT_TOTAL_TIMEOUT: every call as a whole, retries included
    total_timeout: float | None = None

    @property
    def json(self) -> bool:
        return self.output == "json"

    @property
    def http_timeout(self) -> Timeout | NotGiven:
        """The clients' timeout: the one given, else theirs (which leaves long routes unbounded)."""
        if not self.timeout_given:
            return NOT_GIVEN
        return Timeout(self.timeout, connect=min(self.timeout, DEFAULT_TIMEOUT.connect or 5.0))

    def fleet(self, on_result: Callable[[TargetOutcome[Any]], None] | None = None) -> AsyncFleet:
        fleet = AsyncFleet(
            self.urls,
            api_key=self.api_key,
            timeout=self.http_timeout,
            max_retries=self.retries,
            max_concurrency=self.concurrency,
            on_result=on_result,
            verify=self.verify,
            cert=self.cert,
            total_timeout=self.total_timeout,
            raise_on_error=False,  # every target's outcome is printed, failures too
        )
        for client in fleet.clients.values():
            client._speak_cli()
        return fleet


class Number(ParamTypeBase):
    """An int or a float of at least `low` (above it, when `open`); its help shows no range note."""

    def __init__(self, kind: type[int] | type[float], low: float, *, open: bool = False) -> None:
        self.kind, self.low, self.open = kind, low, open
        self.name = "integer" if kind is int else "seconds"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        try:
            number = self.kind(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a valid {self.name}", param, ctx)
        if number < self.low or (self.open and number == self.low):
            self.fail(f"{value} must be {'above' if self.open else 'at least'} {self.low:g}", param, ctx)
        return number


SECONDS = Number(float, 0, open=True)


_NO_DEFAULT: Any = object()  # click's own default (not None: a multiple option's is empty)


@dataclass(frozen=True)
class _Global:
    """One global option. On the group it reads `env` and defaults to `default`; on a subcommand it is
    hidden and defaults to None, so that only a value given there overrides the group's."""

    decls: tuple[str, ...]
    help: str
    metavar: str | None = None
    type: Any = None
    env: str | None = None
    default: Any = _NO_DEFAULT
    multiple: bool = False
    flag: bool = False
    hidden: bool = False  # on the group too

    def option(self, *, top: bool) -> click.Option:
        kwargs: dict[str, Any] = {"hidden": self.hidden or not top, "help": self.help}
        if self.metavar is not None:
            kwargs["metavar"] = self.metavar
        if self.type is not None:
            kwargs["type"] = self.type
        if self.env is not None:
            kwargs["envvar"] = self.env if top else None
        if self.multiple:
            kwargs["multiple"] = True
        if self.flag:
            kwargs["is_flag"] = True
        if self.default is not _NO_DEFAULT:
            kwargs["default"] = self.default if top else None
        return click.Option(list(self.decls), **kwargs)


# The options every subcommand takes, in the order the group's help shows them.
_GLOBALS = (
    _Global(
        ("--url", "urls"),
        f"Server URL; repeat for a fleet.  [default: $VLLM_DEVCLIENT_URL, else {DEFAULT_URL}]",
        metavar="URL",
        env="VLLM_DEVCLIENT_URL",
        multiple=True,
    ),
    _Global(
        ("--api-key",),
        "Bearer key, never printed.  [default: $VLLM_API_KEY]",
        metavar="KEY",
        env="VLLM_API_KEY",
    ),
    # TLS, by curl's names. --key stays out of the group's help (to fit a screen): --cert's help names it.
    _Global(("--cacert",), "CA bundle for https.  [default: $SSL_CERT_FILE]", metavar="FILE"),
    _Global(("--cert",), "Client certificate (mTLS; PEM, key in it or --key).", metavar="FILE"),
    _Global(("--key",), "The key of --cert, in a file of its own.", metavar="FILE", hidden=True),
    _Global(("--insecure",), "Do not check https certificates (a warning says so).", flag=True, default=None),
    _Global(
        ("--timeout",),
        "Seconds per try (default 30, long routes unbounded).",
        metavar="SECONDS",
        type=SECONDS,
        env=TIMEOUT_ENV,
        default=None,
    ),
    _Global(
        ("--total-timeout",),
        "Seconds per call, retries included (default none).",
        metavar="SECONDS",
        type=SECONDS,
        env=TOTAL_TIMEOUT_ENV,
        default=None,
    ),
    _Global(
        ("--retries",),
        "Retries on connection errors, 502-504 (default 2).",
        metavar="N",
        type=Number(int, 0),
        default=2,
    ),
    _Global(
        ("--concurrency",),
        f"Most targets in flight at once (default {DEFAULT_MAX_CONCURRENCY}).",
        metavar="N",
        type=Number(int, 1),
        default=DEFAULT_MAX_CONCURRENCY,
    ),
    _Global(
        ("-o", "--output"),
        "table, json (docs/cli.md) or tsv (default table).",
        metavar="FORMAT",
        type=click.Choice(["table", "json", "tsv"]),
        default=None,
    ),
    _Global(("--json", "as_json"), "Same as -o json.", flag=True, default=None),
    _Global(("--no-progress",), "No progress display (only ever on a terminal).", flag=True, default=None),
)


def global_params(*, top: bool, exclude: tuple[str, ...] = ()) -> list[click.Parameter]:
    """The options every subcommand takes. On the group they are shown, read the environment and have
    defaults; on a subcommand they are hidden and override the group's (`health --json` works too);
    `exclude` leaves out those a subcommand has an option of its own for."""
    params: list[click.Parameter] = [g.option(top=top) for g in _GLOBALS]
    return [p for p in params if p.name not in exclude]


def global_options(*, top: bool, exclude: tuple[str, ...] = ()) -> Callable[[F], F]:
    """`global_params` as a decorator."""

    def decorate(fn: F) -> F:
        params = fn.__dict__.setdefault("__click_params__", [])
        params.extend(reversed(global_params(top=top, exclude=exclude)))
        return fn

    return decorate


def _output(params: Mapping[str, Any]) -> Output | None:
    if params.get("as_json"):
        return "json"
    chosen: Output | None = params.get("output")
    return chosen


def settings_of(ctx: click.Context, sub: Mapping[str, Any]) -> Settings:
    """The group's options, overridden by those given after the subcommand."""
    root = ctx.find_root()
    top: Mapping[str, Any] = root.params

    def pick(name: str) -> Any:
        value = sub.get(name)
        return value if value not in (None, ()) else top.get(name)

    sub_urls = tuple(sub.get("urls") or ())
    urls = sub_urls or tuple(top.get("urls") or ()) or (DEFAULT_URL,)
    given = bool(sub_urls) or root.get_parameter_source("urls") is ParameterSource.COMMANDLINE
    api_key = pick("api_key")
    keep_secret(api_key)
    for url in urls:
        keep_secret(urlsplit(url).password)
    verify, cert = _tls(pick, ctx)
    timeout_given = pick("timeout") is not None
    return Settings(
        urls=tuple(normalise_url(u) for u in urls),
        urls_given=given,
        api_key=api_key,
        timeout=float(pick("timeout") or DEFAULT_TIMEOUT.read or 30.0),
        timeout_given=timeout_given,
        total_timeout=pick("total_timeout"),
        retries=int(pick("retries")),
        concurrency=int(pick("concurrency") or DEFAULT_MAX_CONCURRENCY),
        output=_output(sub) or _output(top) or "table",
        progress=not pick("no_progress"),
        verify=verify,
        cert=cert,
    )


def _tls(pick: Callable[[str], Any], ctx: click.Context) -> tuple[VerifyArg, CertArg | None]:
    """`verify=` and `cert=` from --cacert, --insecure, --cert and --key (the SDK checks the files)."""
    cacert, insecure, certfile, keyfile = pick("cacert"), pick("insecure"), pick("cert"), pick("key")
    if cacert and insecure:
        raise click.UsageError("--cacert and --insecure contradict each other: pass one of them", ctx)
    if keyfile and not certfile:
        raise click.UsageError("--key needs --cert (the certificate the key belongs to)", ctx)
    verify: VerifyArg = False if insecure else cacert or True
    return verify, (None if not certfile else (certfile, keyfile))


def split_globals(kwargs: dict[str, Any]) -> dict[str, Any]:
    """Take the (hidden) global options out of a subcommand's keyword arguments."""
    return {name: kwargs.pop(name) for name in GLOBAL_OPTIONS if name in kwargs}
