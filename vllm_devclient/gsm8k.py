"""GSM8K the way vLLM's own CI runs it (``tests/evals/gsm8k/gsm8k_eval.py``), through ``/v1/completions``.

- Data: OpenAI's grade-school-math ``train.jsonl`` / ``test.jsonl``, downloaded once into a cache directory
  and checked against pinned sha256 sums. On an offline machine point ``VLLM_DEVCLIENT_GSM8K_DIR`` (or
  ``data_dir=``) at a folder that holds the two files: nothing is downloaded then.
- Prompt: the first ``num_shots`` train items as ``"Question: {q}\\nAnswer: {a}\\n\\n"``, then
  ``"Question: {test_q}\\nAnswer:"``; the first ``num_questions`` test items, in order.
- Sampling: temperature 0, ``max_tokens`` 256, seed 42, vLLM's stop strings.
- Scoring: drop commas, take the last run of digits; none (or one Python cannot read, like ``007``) is
  invalid, exactly as vLLM scores it.
"""

from __future__ import annotations

import ast
import asyncio
import hashlib
import json
import os
import re
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import httpx
from pydantic import BaseModel, ConfigDict

from vllm_devclient.errors import (
    APIConnectionError,
    APITimeoutError,
    DevClientError,
    InvalidParameterError,
    ResponseValidationError,
    error_from_response,
)

__all__ = [
    "DATA_DIR_ENV",
    "GSM8K_SHA256",
    "GSM8K_URLS",
    "STOP",
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
    "load_gsm8k",
    "load_split",
]

Split = Literal["train", "test"]

DATA_DIR_ENV = "VLLM_DEVCLIENT_GSM8K_DIR"
CACHE_DIR_ENV = "VLLM_DEVCLIENT_CACHE_DIR"
_BASE_URL = "https://raw.githubusercontent.com/openai/grade-school-math/master/grade_school_math/data"
GSM8K_URLS: dict[str, str] = {"train": f"{_BASE_URL}/train.jsonl", "test": f"{_BASE_URL}/test.jsonl"}
# sha256 of the canonical files (7473 train and 1319 test items).
GSM8K_SHA256: dict[str, str] = {
    "train": "17f347dc51477c50d4efb83959dbb7c56297aba886e5544ee2aaed3024813465",
    "test": "3730d312f6e3440559ace48831e51066acaca737f6eabec99bccb9e4b3c39d14",
}
STOP: tuple[str, ...] = ("Question", "Assistant:", "<|separator|>")
_DIGITS = re.compile(r"\d+")


class GSM8KDataError(DevClientError):
    """The GSM8K files are missing, could not be downloaded, or do not match their checksum."""


@dataclass(frozen=True)
class GSM8KItem:
    question: str
    answer: str


@dataclass(frozen=True)
class GSM8KPrompt:
    index: int
    prompt: str
    label: int


def default_cache_dir() -> Path:
    """The download cache: ``$VLLM_DEVCLIENT_CACHE_DIR/gsm8k``, else under $XDG_CACHE_HOME or ~/.cache."""
    root = os.environ.get(CACHE_DIR_ENV)
    if root:
        return Path(root) / "gsm8k"
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg else Path.home() / ".cache"
    return base / "vllm-devclient" / "gsm8k"


def _sha256(path: Path) -> str:
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
    url = GSM8K_URLS[split]
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
    got = hashlib.sha256(response.content).hexdigest()
    if got != GSM8K_SHA256[split]:
        raise GSM8KDataError(f"downloaded {url} has sha256 {got}, expected {GSM8K_SHA256[split]}")
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
    download: bool = True,
    verify: bool = True,
    timeout: float = 60.0,
    client: httpx.Client | None = None,
) -> list[GSM8KItem]:
    """One GSM8K split.

    With ``data_dir`` (or ``$VLLM_DEVCLIENT_GSM8K_DIR``) the file is read from there and never downloaded;
    otherwise it comes from the cache (:func:`default_cache_dir`), downloaded on first use. ``verify``
    checks the pinned sha256.
    """
    if split not in GSM8K_URLS:
        raise InvalidParameterError(f"split must be 'train' or 'test', not {split!r}")
    explicit = data_dir if data_dir is not None else os.environ.get(DATA_DIR_ENV) or None
    if explicit is not None:
        path = Path(explicit) / f"{split}.jsonl"
        if not path.is_file():
            origin = "data_dir" if data_dir is not None else f"${DATA_DIR_ENV}"
            raise GSM8KDataError(
                f"{path} does not exist ({origin}={explicit}): put GSM8K's {split}.jsonl there "
                f"(from {GSM8K_URLS[split]}), or unset it to download into {default_cache_dir()}"
            )
    else:
        path = default_cache_dir() / f"{split}.jsonl"
        if not path.is_file() or (verify and _sha256(path) != GSM8K_SHA256[split]):
            if not download:
                raise GSM8KDataError(
                    f"{path} is missing or damaged and download=False: set {DATA_DIR_ENV} to a folder "
                    "with train.jsonl and test.jsonl, or allow the download"
                )
            _download(split, path, timeout=timeout, client=client)
    if verify:
        got = _sha256(path)
        if got != GSM8K_SHA256[split]:
            raise GSM8KDataError(
                f"{path} has sha256 {got}, expected {GSM8K_SHA256[split]} (the canonical "
                f"{GSM8K_URLS[split]}); replace it, or pass verify=False to use it anyway"
            )
    return _read_jsonl(path)


def load_gsm8k(
    *, data_dir: str | os.PathLike[str] | None = None, download: bool = True, verify: bool = True
) -> tuple[list[GSM8KItem], list[GSM8KItem]]:
    """``(train, test)``; see :func:`load_split`."""
    return (
        load_split("train", data_dir=data_dir, download=download, verify=verify),
        load_split("test", data_dir=data_dir, download=download, verify=verify),
    )


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
    """One question: what the server answered and how it scored."""

    model_config = ConfigDict(frozen=True)

    index: int
    label: int
    text: str
    prediction: int | None
    correct: bool
    output_tokens: int
    latency_s: float
    finish_reason: str | None = None


class GSM8KResult(BaseModel):
    """A GSM8K run: accuracy, invalid rate, timings and every answer."""

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

    @property
    def texts(self) -> list[str]:
        return [q.text for q in self.questions]


def _summarize(
    results: Sequence[QuestionResult],
    *,
    num_shots: int,
    max_tokens: int,
    concurrency: int | None,
    latency: float,
) -> GSM8KResult:
    n = len(results)
    tokens = sum(r.output_tokens for r in results)
    return GSM8KResult(
        num_questions=n,
        num_shots=num_shots,
        max_tokens=max_tokens,
        concurrency=concurrency,
        accuracy=sum(r.correct for r in results) / n if n else 0.0,
        invalid_rate=sum(r.prediction is None for r in results) / n if n else 0.0,
        latency_s=latency,
        questions_per_s=n / latency if latency > 0 else 0.0,
        output_tokens=tokens,
        output_tokens_per_s=tokens / latency if latency > 0 else 0.0,
        mean_request_latency_s=sum(r.latency_s for r in results) / n if n else 0.0,
        questions=list(results),
    )


def _progress_bar(progress: bool | None, total: int) -> Any:
    if progress is False:
        return None
    try:
        from tqdm import tqdm
    except ImportError as exc:
        if progress:
            raise ImportError("progress=True needs tqdm: pip install 'vllm-devclient[gsm8k]'") from exc
        return None
    return tqdm(total=total, desc="GSM8K", unit="q")


async def _complete(
    client: httpx.AsyncClient, prompt: GSM8KPrompt, body: dict[str, Any], timeout: float
) -> QuestionResult:
    payload = {**body, "prompt": prompt.prompt}
    url = str(client.base_url).rstrip("/") + "/v1/completions"
    start = time.perf_counter()
    try:
        response = await client.post("/v1/completions", json=payload, timeout=timeout)
    except httpx.TimeoutException as exc:
        raise APITimeoutError(
            f"question {prompt.index}: /v1/completions timed out", method="POST", url=url
        ) from exc
    except httpx.TransportError as exc:
        raise APIConnectionError(
            f"question {prompt.index}: /v1/completions failed: {exc}", method="POST", url=url
        ) from exc
    elapsed = time.perf_counter() - start
    if response.status_code != 200:
        raise error_from_response(response, method="POST", path="/v1/completions", dev_route=False)
    try:
        data = response.json()
        choice = data["choices"][0]
        text = str(choice["text"])
        usage = data.get("usage") or {}
        tokens = int(usage.get("completion_tokens") or 0)
        finish = choice.get("finish_reason")
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        raise ResponseValidationError(
            f"question {prompt.index}: not a completion ({exc})",
            method="POST",
            path="/v1/completions",
            status_code=response.status_code,
            body=response.text,
        ) from exc
    prediction = extract_answer(text)
    return QuestionResult(
        index=prompt.index,
        label=prompt.label,
        text=text,
        prediction=prediction,
        correct=prediction is not None and prediction == prompt.label,
        output_tokens=tokens,
        latency_s=elapsed,
        finish_reason=None if finish is None else str(finish),
    )


async def _served_model(client: httpx.AsyncClient, timeout: float) -> str:
    """The first model on /v1/models: vLLM's Rust frontend (0.26) rejects a completion without "model"."""
    url = str(client.base_url).rstrip("/") + "/v1/models"
    try:
        response = await client.get("/v1/models", timeout=timeout)
    except httpx.TransportError as exc:
        raise APIConnectionError(f"GET /v1/models failed: {exc}", method="GET", url=url) from exc
    if response.status_code != 200:
        raise error_from_response(response, method="GET", path="/v1/models", dev_route=False)
    try:
        return str(response.json()["data"][0]["id"])
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        raise ResponseValidationError(
            f"no served model listed ({exc}); pass model=",
            method="GET",
            path="/v1/models",
            status_code=response.status_code,
            body=response.text,
        ) from exc


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
    prompts: Sequence[GSM8KPrompt] | None = None,
    http_client: httpx.AsyncClient | None = None,
) -> GSM8KResult:
    """Run GSM8K through ``/v1/completions``.

    ``concurrency`` caps the requests in flight (None: all at once, as vLLM's CI does; 1: one at a time,
    which keeps batching, and so greedy numerics, the same from run to run). ``prompts`` skips loading
    the data (see :func:`build_prompts`). ``progress``: None shows a bar when tqdm is installed.
    ``model``: None sends the first model listed on ``/v1/models``.
    """
    if concurrency is not None and concurrency < 1:
        raise InvalidParameterError(f"concurrency must be >= 1 or None, not {concurrency}")
    if base_url is None and http_client is None:
        raise InvalidParameterError("pass base_url or http_client")
    if prompts is None:
        train, test = load_gsm8k(data_dir=data_dir)
        prompts = build_prompts(train, test, num_questions, num_shots)
    body: dict[str, Any] = {"max_tokens": max_tokens, "stop": list(STOP), "temperature": temperature}
    if seed is not None:
        body["seed"] = seed
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else None
    limit = asyncio.Semaphore(concurrency or max(len(prompts), 1))
    bar = _progress_bar(progress, len(prompts))

    async def run_all(client: httpx.AsyncClient) -> list[QuestionResult]:
        body["model"] = model if model is not None else await _served_model(client, request_timeout)
        return list(await asyncio.gather(*(one(client, p) for p in prompts)))

    async def one(client: httpx.AsyncClient, prompt: GSM8KPrompt) -> QuestionResult:
        async with limit:
            result = await _complete(client, prompt, body, request_timeout)
        if bar is not None:
            bar.update(1)
        return result

    start = time.perf_counter()
    try:
        if http_client is not None:
            results = await run_all(http_client)
        else:
            assert base_url is not None
            pool = httpx.Limits(max_connections=concurrency or len(prompts) or 1)
            async with httpx.AsyncClient(base_url=base_url, headers=headers, limits=pool) as client:
                results = await run_all(client)
    finally:
        if bar is not None:
            bar.close()
    latency = time.perf_counter() - start
    return _summarize(
        sorted(results, key=lambda r: r.index),
        num_shots=num_shots,
        max_tokens=max_tokens,
        concurrency=concurrency,
        latency=latency,
    )


def evaluate_gsm8k(base_url: str, **kwargs: Any) -> GSM8KResult:
    """Blocking :func:`evaluate_gsm8k_async` (not from inside a running event loop)."""
    return asyncio.run(evaluate_gsm8k_async(base_url, **kwargs))
