"""GSM8K as vLLM's CI runs it (``tests/evals/gsm8k/gsm8k_eval.py``), through the client's ``completion()``.

- Data: OpenAI's grade-school-math ``train.jsonl`` / ``test.jsonl``, downloaded once into a cache folder and
  checked against pinned sha256 sums (a mirror: ``VLLM_DEVCLIENT_GSM8K_URL``, the folder URL holding the two
  files; the same sums apply). On an offline machine point ``VLLM_DEVCLIENT_GSM8K_DIR`` (or ``data_dir=``) at
  a folder holding the two files: nothing is downloaded then. ``sample=True`` reads the sample shipped in the
  package (the first 60 test and 40 train items, MIT-licensed like GSM8K, its own pinned sums): a smoke run,
  and what the tests read. Settings are read when a function runs, never at import.
- Prompt: the first ``num_shots`` train items as ``"Question: {q}\\nAnswer: {a}\\n\\n"``, then
  ``"Question: {test_q}\\nAnswer:"``; the first ``num_questions`` test items, in order.
- Sampling: temperature 0, ``max_tokens`` 256, seed 42, vLLM's stop strings.
- Scoring: drop commas, take the last run of digits; none (or one Python cannot read, like ``007``) is
  invalid, exactly as vLLM scores it.
- Failures, as upstream counts them: a request that fails is an empty (invalid) answer, and the result says
  how many failed. A 503 means the server refused before doing any work, so it is retried (completions are
  not idempotent, so the client itself never retries them).
- Concurrency: a semaphore over one :class:`~vllm_devclient.AsyncDevClient`.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import hashlib
import json
import os
import re
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict

from vllm_devclient.errors import (
    DevClientError,
    EngineDeadError,
    InvalidParameterError,
    ServiceUnavailableError,
)

if TYPE_CHECKING:
    import httpx
    import httpx2

    from vllm_devclient.client import AsyncDevClient

__all__ = [
    "CACHE_DIR_ENV",
    "DATA_DIR_ENV",
    "GSM8K_SAMPLE_SHA256",
    "GSM8K_SHA256",
    "GSM8K_URLS",
    "SAMPLE_DIR",
    "STOP",
    "URL_ENV",
    "GSM8KChecksumError",
    "GSM8KDataError",
    "GSM8KItem",
    "GSM8KPrompt",
    "GSM8KResult",
    "QuestionResult",
    "build_prompts",
    "default_cache_dir",
    "evaluate_gsm8k",
    "evaluate_gsm8k_async",
    "extract_answer",
    "file_sha256",
    "gsm8k_urls",
    "load_gsm8k",
    "load_split",
]

Split = Literal["train", "test"]

DATA_DIR_ENV = "VLLM_DEVCLIENT_GSM8K_DIR"
CACHE_DIR_ENV = "VLLM_DEVCLIENT_CACHE_DIR"
URL_ENV = "VLLM_DEVCLIENT_GSM8K_URL"
_BASE_URL = "https://raw.githubusercontent.com/openai/grade-school-math/master/grade_school_math/data"
GSM8K_URLS: dict[str, str] = {"train": f"{_BASE_URL}/train.jsonl", "test": f"{_BASE_URL}/test.jsonl"}
# sha256 of the canonical files (7473 train and 1319 test items).
GSM8K_SHA256: dict[str, str] = {
    "train": "17f347dc51477c50d4efb83959dbb7c56297aba886e5544ee2aaed3024813465",
    "test": "3730d312f6e3440559ace48831e51066acaca737f6eabec99bccb9e4b3c39d14",
}
# The sample in the package: the canonical files' first 40 train and 60 test lines (its README says so).
SAMPLE_DIR = Path(__file__).resolve().parent / "data" / "gsm8k_sample"
GSM8K_SAMPLE_SHA256: dict[str, str] = {
    "train": "36031994776bdec88b524a9cb53d166d4da21a651cfa4e0c5aac5f80e2ea21aa",
    "test": "4a665a79d70d7d83f14400fdb75f421e201ce1ae8ec94fa87157e5a3feae75aa",
}
STOP: tuple[str, ...] = ("Question", "Assistant:", "<|separator|>")
_DIGITS = re.compile(r"\d+")


class GSM8KDataError(DevClientError):
    """The GSM8K files are missing, could not be downloaded, or do not match their checksum."""


class GSM8KChecksumError(GSM8KDataError):
    """A GSM8K file (a download, a cached or an offline copy) does not hash to its pinned sha256."""

    def __init__(self, message: str, *, source: str, expected: str, got: str) -> None:
        super().__init__(message)
        self.source = source  # the URL or path that was read
        self.expected = expected
        self.got = got


@dataclass(frozen=True)
class GSM8KItem:
    question: str
    answer: str


@dataclass(frozen=True)
class GSM8KPrompt:
    """One prompt: its text, or (``token_ids``) the exact tokens to send; ``max_tokens`` overrides a run's."""

    index: int
    prompt: str
    label: int | None
    token_ids: tuple[int, ...] | None = None
    max_tokens: int | None = None


def default_cache_dir() -> Path:
    """The download cache: ``$VLLM_DEVCLIENT_CACHE_DIR/gsm8k``, else under $XDG_CACHE_HOME or ~/.cache."""
    root = os.environ.get(CACHE_DIR_ENV)
    if root:
        return Path(root) / "gsm8k"
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg else Path.home() / ".cache"
    return base / "vllm-devclient" / "gsm8k"


def gsm8k_urls() -> dict[str, str]:
    """Where each split is downloaded from: ``$VLLM_DEVCLIENT_GSM8K_URL/{split}.jsonl``, else upstream's."""
    base = os.environ.get(URL_ENV, "").rstrip("/")
    return {split: f"{base}/{split}.jsonl" for split in GSM8K_URLS} if base else dict(GSM8K_URLS)


def file_sha256(path: Path) -> str:
    """The sha256 hex digest of a file, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _read_jsonl(path: Path) -> list[GSM8KItem]:
    items: list[GSM8KItem] = []
    with path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip() or line.startswith("#"):
                continue
            try:
                row = json.loads(line)
                items.append(GSM8KItem(question=str(row["question"]), answer=str(row["answer"])))
            except (ValueError, KeyError, TypeError) as exc:
                raise GSM8KDataError(f"{path}:{lineno}: not a GSM8K line ({exc})") from exc
    return items


def _download(split: Split, dest: Path, *, timeout: float, client: httpx.Client | None) -> None:
    # The data lives on GitHub, not on a vLLM server: a plain download, outside the client's request layer.
    from vllm_devclient.transports.stacks import load

    httpx = load("httpx", "downloading GSM8K")

    url = gsm8k_urls()[split]
    dest.parent.mkdir(parents=True, exist_ok=True)
    try:
        if client is None:
            with httpx.Client(follow_redirects=True) as own:
                response = own.get(url, timeout=timeout)
        else:
            response = client.get(url, timeout=timeout)
        response.raise_for_status()
    except httpx.HTTPError as exc:
        raise GSM8KDataError(
            f"could not download GSM8K {split} from {url}: {exc}. On an offline machine, copy train.jsonl "
            f"and test.jsonl into a folder and set {DATA_DIR_ENV} to it."
        ) from exc
    got, expected = hashlib.sha256(response.content).hexdigest(), GSM8K_SHA256[split]
    if got != expected:
        raise GSM8KChecksumError(
            f"downloaded {url} has sha256 {got}, expected {expected} (GSM8K's {split}.jsonl); nothing "
            f"was cached. Check {URL_ENV} when set, or put the right file in a folder and set {DATA_DIR_ENV}",
            source=url,
            expected=expected,
            got=got,
        )
    # Write next to the target and rename, so a crash never leaves a half file in the cache.
    fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=f".{split}.", suffix=".part")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(response.content)
        os.replace(tmp, dest)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def load_split(
    split: Split,
    *,
    data_dir: str | os.PathLike[str] | None = None,
    sample: bool = False,
    download: bool = True,
    verify: bool = True,
    timeout: float = 60.0,
    client: httpx.Client | None = None,
) -> list[GSM8KItem]:
    """One GSM8K split.

    With ``data_dir`` (or ``$VLLM_DEVCLIENT_GSM8K_DIR``) the file is read from there and never downloaded;
    ``sample=True`` reads the package's sample (:data:`SAMPLE_DIR`, checked against its own sums also when
    given as ``data_dir``); otherwise it comes from the cache
    (:func:`default_cache_dir`), downloaded on first use from :func:`gsm8k_urls`. ``verify`` checks the
    pinned sha256 (:class:`GSM8KChecksumError` when it differs).
    """
    if split not in GSM8K_URLS:
        raise InvalidParameterError(f"split must be 'train' or 'test', not {split!r}")
    if sample and data_dir is not None:
        raise InvalidParameterError("pass data_dir or sample=True, not both")
    explicit = SAMPLE_DIR if sample else data_dir if data_dir is not None else os.environ.get(DATA_DIR_ENV)
    if explicit:
        path = Path(explicit) / f"{split}.jsonl"
        if not path.is_file():
            origin = "data_dir" if data_dir is not None else "sample" if sample else f"${DATA_DIR_ENV}"
            raise GSM8KDataError(
                f"{path} does not exist ({origin}={explicit}): put GSM8K's {split}.jsonl there "
                f"(from {GSM8K_URLS[split]}), or unset it to download into {default_cache_dir()}"
            )
        if verify:  # the package's sample folder, however named, is checked against the sample's sums
            own = sample or Path(explicit).resolve() == SAMPLE_DIR
            _check_file(path, split, (GSM8K_SAMPLE_SHA256 if own else GSM8K_SHA256)[split])
    else:
        # The cached file is used only when it hashes right; a download is checked before it is written.
        path = default_cache_dir() / f"{split}.jsonl"
        if not path.is_file() or (verify and file_sha256(path) != GSM8K_SHA256[split]):
            if not download:
                raise GSM8KDataError(
                    f"{path} is missing or damaged and download=False: set {DATA_DIR_ENV} to a folder "
                    "with train.jsonl and test.jsonl, or allow the download"
                )
            _download(split, path, timeout=timeout, client=client)
    return _read_jsonl(path)


def _check_file(path: Path, split: Split, expected: str) -> None:
    got = file_sha256(path)
    if got != expected:
        raise GSM8KChecksumError(
            f"{path} has sha256 {got}, expected {expected} (the canonical {split}.jsonl); replace it, "
            "or pass verify=False to use it anyway",
            source=str(path),
            expected=expected,
            got=got,
        )


def load_gsm8k(
    *,
    data_dir: str | os.PathLike[str] | None = None,
    sample: bool = False,
    download: bool = True,
    verify: bool = True,
) -> tuple[list[GSM8KItem], list[GSM8KItem]]:
    """``(train, test)``; see :func:`load_split`."""
    kw: dict[str, Any] = {"data_dir": data_dir, "sample": sample, "download": download, "verify": verify}
    return load_split("train", **kw), load_split("test", **kw)


def extract_answer(text: str) -> int | None:
    """The last integer in ``text`` (commas dropped), or None when there is none: vLLM's scoring."""
    numbers = _DIGITS.findall(text.replace(",", ""))
    if not numbers:
        return None
    try:
        value = ast.literal_eval(numbers[-1])
    except (SyntaxError, ValueError):
        # "007" is no Python literal: vLLM counts it invalid, and so do we.
        return None
    return value if isinstance(value, int) else None


def build_prompts(
    train: Sequence[GSM8KItem], test: Sequence[GSM8KItem], num_questions: int, num_shots: int = 5
) -> list[GSM8KPrompt]:
    """vLLM's few-shot completion prompts for the first ``num_questions`` test items."""
    if num_questions < 0 or num_shots < 0:
        raise InvalidParameterError("num_questions and num_shots must be >= 0")
    if num_shots > len(train):
        raise InvalidParameterError(f"num_shots={num_shots} but only {len(train)} train items")
    shots = "".join(f"Question: {item.question}\nAnswer: {item.answer}\n\n" for item in train[:num_shots])
    prompts: list[GSM8KPrompt] = []
    for index, item in enumerate(test[:num_questions]):
        label = extract_answer(item.answer)
        if label is None:
            raise GSM8KDataError(f"test item {index} has no numeric answer: {item.answer[-60:]!r}")
        prompts.append(GSM8KPrompt(index, f"{shots}Question: {item.question}\nAnswer:", label))
    return prompts


class QuestionResult(BaseModel):
    """One question: what the server answered and how it scored (``error``: the request failed)."""

    model_config = ConfigDict(frozen=True)

    index: int
    label: int | None
    text: str
    prediction: int | None
    correct: bool
    output_tokens: int
    latency_s: float
    finish_reason: str | None = None
    error: str | None = None
    attempts: int = 1
    prompt_tokens: int | None = None
    cached_tokens: int | None = None  # usage.prompt_tokens_details, where the server reports it


class GSM8KResult(BaseModel):
    """A GSM8K run: accuracy, invalid rate (failed requests included), failures, timings, every answer."""

    model_config = ConfigDict(frozen=True)

    num_questions: int
    num_shots: int
    max_tokens: int
    concurrency: int | None
    accuracy: float
    invalid_rate: float
    latency_s: float
    questions_per_s: float
    output_tokens: int
    output_tokens_per_s: float
    mean_request_latency_s: float
    questions: list[QuestionResult]
    failed_requests: int = 0
    retried_requests: int = 0

    @property
    def texts(self) -> list[str]:
        return [q.text for q in self.questions]

    @property
    def failed_rate(self) -> float:
        return self.failed_requests / self.num_questions if self.num_questions else 0.0

    @property
    def errors(self) -> list[str]:
        """The distinct failure messages, first seen first."""
        return list(dict.fromkeys(q.error for q in self.questions if q.error))


def summarize(
    results: Sequence[QuestionResult],
    *,
    num_shots: int,
    max_tokens: int,
    concurrency: int | None,
    latency: float,
) -> GSM8KResult:
    """A :class:`GSM8KResult` from per-question results (sorted by index)."""
    ordered = sorted(results, key=lambda r: r.index)
    n = len(ordered)
    tokens = sum(r.output_tokens for r in ordered)
    return GSM8KResult(
        num_questions=n,
        num_shots=num_shots,
        max_tokens=max_tokens,
        concurrency=concurrency,
        accuracy=sum(r.correct for r in ordered) / n if n else 0.0,
        invalid_rate=sum(r.prediction is None for r in ordered) / n if n else 0.0,
        latency_s=latency,
        questions_per_s=n / latency if latency > 0 else 0.0,
        output_tokens=tokens,
        output_tokens_per_s=tokens / latency if latency > 0 else 0.0,
        mean_request_latency_s=sum(r.latency_s for r in ordered) / n if n else 0.0,
        questions=ordered,
        failed_requests=sum(r.error is not None for r in ordered),
        retried_requests=sum(r.attempts > 1 for r in ordered),
    )


def _progress_bar(progress: bool | None, total: int) -> Any:
    """A tqdm bar on stderr: always with ``progress=True``, with None only when stderr is a terminal."""
    if progress is False or (progress is None and not sys.stderr.isatty()):
        return None
    try:
        from tqdm import tqdm
    except ImportError as exc:
        if progress:
            raise ImportError("progress=True needs tqdm: pip install 'vllm-devclient[gsm8k]'") from exc
        return None
    return tqdm(total=total, desc="GSM8K", unit="q", file=sys.stderr)


def _refused(exc: DevClientError) -> bool:
    """A 503 saying the server did no work (overloaded, not yet ready); a dead engine is no such refusal."""
    return isinstance(exc, ServiceUnavailableError) and not isinstance(exc, EngineDeadError)


@dataclass(frozen=True)
class _Sampling:
    model: str
    max_tokens: int
    temperature: float
    seed: int | None
    request_timeout: float
    retries_503: int
    retry_delay: float


async def _ask(client: AsyncDevClient, prompt: GSM8KPrompt, s: _Sampling) -> QuestionResult:
    attempts = 0
    start = time.perf_counter()
    while True:
        attempts += 1
        try:
            done = await client.completion(
                list(prompt.token_ids) if prompt.token_ids is not None else prompt.prompt,
                model=s.model,
                max_tokens=prompt.max_tokens or s.max_tokens,
                temperature=s.temperature,
                seed=s.seed,
                stop=list(STOP),
                timeout=s.request_timeout,
            )
        except DevClientError as exc:
            if _refused(exc) and attempts <= s.retries_503:
                await asyncio.sleep(s.retry_delay * 2 ** (attempts - 1))
                continue
            return QuestionResult(
                index=prompt.index,
                label=prompt.label,
                text="",
                prediction=None,
                correct=False,
                output_tokens=0,
                latency_s=time.perf_counter() - start,
                error=f"{type(exc).__name__}: {exc}"[:500],
                attempts=attempts,
            )
        prediction = extract_answer(done.text)
        return QuestionResult(
            index=prompt.index,
            label=prompt.label,
            text=done.text,
            prediction=prediction,
            correct=prediction is not None and prediction == prompt.label,
            output_tokens=done.output_tokens,
            latency_s=time.perf_counter() - start,
            finish_reason=done.finish_reason,
            attempts=attempts,
            prompt_tokens=done.usage.prompt_tokens if done.usage is not None else None,
            cached_tokens=done.usage.cached_tokens if done.usage is not None else None,
        )


async def evaluate_gsm8k_async(
    base_url: str | None = None,
    *,
    num_questions: int = 200,
    num_shots: int = 5,
    max_tokens: int = 256,
    concurrency: int | None = None,
    temperature: float = 0.0,
    seed: int | None = 42,
    model: str | None = None,
    api_key: str | None = None,
    request_timeout: float = 600.0,
    progress: bool | None = None,
    data_dir: str | os.PathLike[str] | None = None,
    sample: bool = False,
    prompts: Sequence[GSM8KPrompt] | None = None,
    client: AsyncDevClient | None = None,
    http_client: httpx.AsyncClient | httpx2.AsyncClient | None = None,
    retries_503: int = 5,
    retry_delay: float = 0.5,
    spread_s: float = 0.0,
) -> GSM8KResult:
    """Run GSM8K through ``/v1/completions`` with :meth:`AsyncDevClient.completion`.

    Give ``base_url`` (a trailing ``/v1`` is accepted), an ``AsyncDevClient`` (``client``, kept open), or an
    ``httpx.AsyncClient`` or ``httpx2.AsyncClient`` with a base URL (``http_client``). ``concurrency`` caps
    requests in flight (None: all at once, as vLLM's CI does; 1: one at a time, which keeps batching, and so
    greedy numerics, the same from run to run). ``prompts`` skips loading the data (else ``data_dir`` and
    ``sample`` as in :func:`load_split`). ``model``: None sends the first model on ``/v1/models`` (vLLM
    0.26's Rust frontend rejects a completion without one). A request that fails counts as an invalid answer
    (``failed_requests``); a 503 is retried ``retries_503`` times with backoff.
    ``spread_s`` sends the requests evenly over that many seconds instead of at once (request ``i`` of ``n``
    waits ``i * spread_s / n``): the same prompts in other batches.
    """
    _check_evaluation(
        concurrency, spread_s, server_given=(base_url, client, http_client) != (None, None, None)
    )
    if prompts is None:
        train, test = load_gsm8k(data_dir=data_dir, sample=sample)
        prompts = build_prompts(train, test, num_questions, num_shots)
    async with _client_of(base_url, client, http_client, api_key=api_key, timeout=request_timeout) as c:
        bar = _progress_bar(progress, len(prompts))
        start = time.perf_counter()
        try:
            model = model if model is not None else await _first_model(c, request_timeout)
            sampling = _Sampling(
                model, max_tokens, temperature, seed, request_timeout, retries_503, retry_delay
            )
            results = await _ask_all(
                c, prompts, sampling, concurrency=concurrency, spread_s=spread_s, bar=bar
            )
        finally:
            if bar is not None:
                bar.close()
    latency = time.perf_counter() - start
    return summarize(
        results, num_shots=num_shots, max_tokens=max_tokens, concurrency=concurrency, latency=latency
    )


def _check_evaluation(concurrency: int | None, spread_s: float, *, server_given: bool) -> None:
    if concurrency is not None and concurrency < 1:
        raise InvalidParameterError(f"concurrency must be >= 1 or None, not {concurrency}")
    if spread_s < 0:
        raise InvalidParameterError(f"spread_s must be >= 0 seconds, not {spread_s}")
    if not server_given:
        raise InvalidParameterError("pass base_url, client or http_client")


@contextlib.asynccontextmanager
async def _client_of(
    base_url: str | None,
    client: AsyncDevClient | None,
    http_client: httpx.AsyncClient | httpx2.AsyncClient | None,
    *,
    api_key: str | None,
    timeout: float,
) -> AsyncIterator[AsyncDevClient]:
    """`client` as it is (kept open), else one of `base_url` or `http_client`'s, closed on leaving."""
    if client is not None:
        yield client
        return
    from vllm_devclient.client import AsyncDevClient

    url = base_url if base_url is not None else str(http_client.base_url) if http_client else ""
    async with AsyncDevClient(url, api_key=api_key, timeout=timeout, http_client=http_client) as own:
        yield own


async def _first_model(client: AsyncDevClient, request_timeout: float) -> str:
    """The first model the server lists on /v1/models."""
    listing = await client.models(timeout=request_timeout)
    if not listing.data:
        raise DevClientError("the server lists no model on /v1/models: pass model=")
    return listing.data[0].id


async def _ask_all(
    client: AsyncDevClient,
    prompts: Sequence[GSM8KPrompt],
    sampling: _Sampling,
    *,
    concurrency: int | None,
    spread_s: float,
    bar: Any,
) -> list[QuestionResult]:
    """Every prompt's answer, in the prompts' order: at most `concurrency` in flight (None: all), request
    `k` of `n` sent `k * spread_s / n` seconds after the first; `bar` (a tqdm bar or None) counts them."""
    limit = asyncio.Semaphore(concurrency or max(len(prompts), 1))
    gap = spread_s / len(prompts) if prompts else 0.0

    async def one(k: int, prompt: GSM8KPrompt) -> QuestionResult:
        if gap:
            await asyncio.sleep(k * gap)
        async with limit:
            result = await _ask(client, prompt, sampling)
        if bar is not None:
            bar.update(1)
        return result

    return await asyncio.gather(*(one(k, p) for k, p in enumerate(prompts)))


def evaluate_gsm8k(base_url: str, **kwargs: Any) -> GSM8KResult:
    """Blocking :func:`evaluate_gsm8k_async` (not from inside a running event loop)."""
    return asyncio.run(evaluate_gsm8k_async(base_url, **kwargs))
