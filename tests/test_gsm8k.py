"""vllm_devclient.gsm8k: data loading (offline folder, cache, checksums), prompts, scoring, the evaluator.

Nothing here reaches the internet or a folder outside the repository: the data is the sample shipped in the
package, and the download path is served by a real HTTP server on 127.0.0.1 (respx refuses any other host).
"""

from __future__ import annotations

import asyncio
import hashlib
import http.server
import json
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import respx

from vllm_devclient import DevClient
from vllm_devclient.errors import DevClientError, InvalidParameterError
from vllm_devclient.gsm8k import (
    DATA_DIR_ENV,
    GSM8K_SAMPLE_SHA256,
    GSM8K_SHA256,
    GSM8K_URLS,
    SAMPLE_DIR,
    STOP,
    URL_ENV,
    GSM8KChecksumError,
    GSM8KDataError,
    GSM8KItem,
    build_prompts,
    default_cache_dir,
    evaluate_gsm8k,
    evaluate_gsm8k_async,
    extract_answer,
    gsm8k_urls,
    load_gsm8k,
    load_split,
)
from vllm_devclient.testing.engine import ScriptedEngine
from vllm_devclient.testing.frontends import RustFrontend

MODELS = {"object": "list", "data": [{"id": "/models/smol", "object": "model"}]}
SAMPLE_SIZES = (40, 60)  # train, test


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[respx.MockRouter]:
    """Every test: data from the package's sample, an empty private cache, and no HTTP beyond 127.0.0.1."""
    monkeypatch.setenv(DATA_DIR_ENV, str(SAMPLE_DIR))
    monkeypatch.setenv("VLLM_DEVCLIENT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv(URL_ENV, raising=False)
    with respx.mock(assert_all_mocked=True, assert_all_called=False) as router:
        router.route(host="127.0.0.1").pass_through()  # the mirror and the real frontend
        yield router


def _sample() -> tuple[list[GSM8KItem], list[GSM8KItem]]:
    return load_gsm8k(sample=True)


class _Mirror:
    """A GSM8K mirror on 127.0.0.1: serves files from a folder, counts the requests."""

    def __init__(self, folder: Path) -> None:
        mirror = self
        self.requests: list[str] = []

        class Handler(http.server.SimpleHTTPRequestHandler):
            def __init__(self, *args: object, **kwargs: object) -> None:
                super().__init__(*args, directory=str(folder), **kwargs)  # type: ignore[arg-type]

            def do_GET(self) -> None:
                mirror.requests.append(self.path)
                super().do_GET()

            def log_message(self, format: str, *args: object) -> None:  # quiet
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/data"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def mirror(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[_Mirror]:
    """The sample's files as a download mirror ($VLLM_DEVCLIENT_GSM8K_URL), no offline folder set."""
    served = tmp_path / "served" / "data"
    served.mkdir(parents=True)
    for split in ("train", "test"):
        shutil.copy(SAMPLE_DIR / f"{split}.jsonl", served / f"{split}.jsonl")
    server = _Mirror(served.parent)
    monkeypatch.delenv(DATA_DIR_ENV)
    monkeypatch.setenv(URL_ENV, server.url + "/")
    yield server
    server.close()


def _pin_the_sample(monkeypatch: pytest.MonkeyPatch) -> None:
    # The repository cannot carry the full files; with the sample's sums pinned, the sample is "the real one".
    for split, digest in GSM8K_SAMPLE_SHA256.items():
        monkeypatch.setitem(GSM8K_SHA256, split, digest)


def test_the_sample_is_pinned_licensed_and_the_start_of_the_real_files() -> None:
    for split, digest in GSM8K_SAMPLE_SHA256.items():
        assert hashlib.sha256((SAMPLE_DIR / f"{split}.jsonl").read_bytes()).hexdigest() == digest
    assert "MIT License" in (SAMPLE_DIR / "LICENSE").read_text()
    train, test = _sample()
    assert (len(train), len(test)) == SAMPLE_SIZES
    assert train[0].question.startswith("Natalia sold clips") and train[0].answer.endswith("#### 72")
    assert test[0].question.startswith("Janet") and test[0].answer.endswith("#### 18")


def test_load_from_the_offline_folder(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # $VLLM_DEVCLIENT_GSM8K_DIR is read and checked against the full files' sums: a copy of the sample fails.
    for split in ("train", "test"):
        shutil.copy(SAMPLE_DIR / f"{split}.jsonl", tmp_path / f"{split}.jsonl")
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path))
    with pytest.raises(GSM8KChecksumError) as info:
        load_gsm8k()
    assert info.value.expected == GSM8K_SHA256["train"] and info.value.got == GSM8K_SAMPLE_SHA256["train"]
    train, test = load_gsm8k(verify=False)
    assert (len(train), len(test)) == SAMPLE_SIZES


def test_the_sample_folder_as_data_dir_is_checked_against_the_samples_sums(tmp_path: Path) -> None:
    assert len(load_split("test", data_dir=SAMPLE_DIR)) == 60  # its own sums, not the full file's
    shutil.copy(SAMPLE_DIR / "test.jsonl", tmp_path / "test.jsonl")
    with pytest.raises(GSM8KChecksumError):  # a copy elsewhere is just a folder: the full file's sums
        load_split("test", data_dir=tmp_path)


def test_sample_and_data_dir_are_one_or_the_other(tmp_path: Path) -> None:
    with pytest.raises(InvalidParameterError, match="not both"):
        load_split("test", data_dir=tmp_path, sample=True)


def test_data_dir_argument_beats_the_environment(tmp_path: Path) -> None:
    shutil.copy(SAMPLE_DIR / "test.jsonl", tmp_path / "test.jsonl")
    assert len(load_split("test", data_dir=tmp_path, verify=False)) == 60
    with pytest.raises(GSM8KDataError, match=r"train\.jsonl"):
        load_split("train", data_dir=tmp_path)


def test_missing_offline_file_says_what_to_do(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path))
    with pytest.raises(GSM8KDataError, match=DATA_DIR_ENV) as info:
        load_split("test")
    assert "test.jsonl" in str(info.value)


def test_damaged_copy_fails_the_checksum(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _pin_the_sample(monkeypatch)
    shutil.copy(SAMPLE_DIR / "test.jsonl", tmp_path / "test.jsonl")
    assert len(load_split("test", data_dir=tmp_path)) == 60
    text = (SAMPLE_DIR / "test.jsonl").read_text().replace("Janet", "Jenny", 1)
    (tmp_path / "test.jsonl").write_text(text)
    with pytest.raises(GSM8KChecksumError, match="sha256") as info:
        load_split("test", data_dir=tmp_path)
    assert info.value.source == str(tmp_path / "test.jsonl")
    items = load_split("test", data_dir=tmp_path, verify=False)
    assert items[0].question.startswith("Jenny")


def test_bad_split_name() -> None:
    with pytest.raises(InvalidParameterError):
        load_split("validation")  # type: ignore[arg-type]


def test_the_default_source_is_upstream_and_a_mirror_is_a_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    assert gsm8k_urls() == GSM8K_URLS
    assert GSM8K_URLS["test"] == (
        "https://raw.githubusercontent.com/openai/grade-school-math/master/grade_school_math/data/test.jsonl"
    )
    monkeypatch.setenv(URL_ENV, "https://mirror.example/gsm8k/")
    assert gsm8k_urls()["train"] == "https://mirror.example/gsm8k/train.jsonl"


def test_download_into_the_cache_once(monkeypatch: pytest.MonkeyPatch, mirror: _Mirror) -> None:
    _pin_the_sample(monkeypatch)
    assert len(load_split("test")) == 60
    cached = default_cache_dir() / "test.jsonl"
    assert cached.read_bytes() == (SAMPLE_DIR / "test.jsonl").read_bytes()
    assert len(load_split("test")) == 60
    assert mirror.requests == ["/data/test.jsonl"]  # the second load came from the cache


def test_damaged_cache_is_downloaded_again(monkeypatch: pytest.MonkeyPatch, mirror: _Mirror) -> None:
    _pin_the_sample(monkeypatch)
    cached = default_cache_dir() / "test.jsonl"
    cached.parent.mkdir(parents=True)
    cached.write_text('{"question": "x", "answer": "#### 1"}\n')
    assert len(load_split("test")) == 60
    assert mirror.requests == ["/data/test.jsonl"]


def test_a_download_of_other_bytes_is_a_checksum_error_and_not_cached(mirror: _Mirror) -> None:
    # The real pins: the mirror's sample is not GSM8K's full test.jsonl.
    with pytest.raises(GSM8KChecksumError, match="sha256") as info:
        load_split("test")
    err = info.value
    assert (err.source, err.expected) == (f"{mirror.url}/test.jsonl", GSM8K_SHA256["test"])
    assert err.got == GSM8K_SAMPLE_SHA256["test"] and URL_ENV in str(err)
    assert list(default_cache_dir().iterdir()) == []  # nothing cached, no partial file left behind


def test_a_failed_download_points_at_the_offline_setting(mirror: _Mirror) -> None:
    mirror.close()  # nothing listens there any more
    with pytest.raises(GSM8KDataError, match=DATA_DIR_ENV) as info:
        load_split("train", timeout=5)
    assert not isinstance(info.value, GSM8KChecksumError) and mirror.url in str(info.value)


def test_a_missing_file_on_the_mirror_is_a_data_error(
    monkeypatch: pytest.MonkeyPatch, mirror: _Mirror
) -> None:
    monkeypatch.setenv(URL_ENV, f"{mirror.url}/elsewhere")
    with pytest.raises(GSM8KDataError, match="404") as info:
        load_split("train", timeout=5)
    assert f"{mirror.url}/elsewhere/train.jsonl" in str(info.value)


def test_no_download_when_forbidden(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(DATA_DIR_ENV)
    with pytest.raises(GSM8KDataError, match="download=False"):
        load_split("test", download=False)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (" She makes 9 * 2 = $<<9*2=18>>18 every day.\n#### 18", 18),
        ("The total is 1,234 dollars.", 1234),
        ("first 3 then 4", 4),
        ("no digits here", None),
        ("", None),
        ("answer 007", None),  # vLLM: ast.literal_eval("007") is a SyntaxError -> invalid
        ("answer 00", 0),
        ("-5 degrees", 5),  # vLLM takes digits only
    ],
)
def test_extract_answer_scores_like_vllm(text: str, expected: int | None) -> None:
    assert extract_answer(text) == expected


def test_prompt_format_matches_vllm() -> None:
    train = [GSM8KItem("What is 1+1?", "1+1=2\n#### 2"), GSM8KItem("What is 2+2?", "#### 4")]
    test = [GSM8KItem("What is 3+3?", "#### 6"), GSM8KItem("And 5+5?", "#### 10")]
    prompts = build_prompts(train, test, num_questions=5, num_shots=2)
    assert len(prompts) == 2  # capped by the test set
    assert prompts[0].prompt == (
        "Question: What is 1+1?\nAnswer: 1+1=2\n#### 2\n\n"
        "Question: What is 2+2?\nAnswer: #### 4\n\n"
        "Question: What is 3+3?\nAnswer:"
    )
    assert [p.label for p in prompts] == [6, 10]
    assert [p.index for p in prompts] == [0, 1]
    with pytest.raises(InvalidParameterError):
        build_prompts(train, test, 1, num_shots=3)


def test_real_prompts_use_five_shots() -> None:
    train, test = _sample()
    prompts = build_prompts(train, test, 3)
    assert prompts[0].prompt.count("Question: ") == 6
    assert prompts[0].prompt.endswith(f"Question: {test[0].question}\nAnswer:")
    assert prompts[0].label == 18


# ---- the evaluator, against the real Rust frontend and a scripted engine --------------------------------


@pytest.fixture(scope="module")
def answering_18() -> Iterator[RustFrontend]:
    # Token ids 19, 26 are "1" and "8" in the tiny test tokenizer: every answer is "18", which is right
    # for test question 0 (Janet's ducks) only.
    with RustFrontend(engine=ScriptedEngine(token_ids=(19, 26), max_model_len=4096)) as fe:
        yield fe


@pytest.mark.parametrize("concurrency", [1, None])
def test_evaluate_against_the_real_frontend(answering_18: RustFrontend, concurrency: int | None) -> None:
    result = evaluate_gsm8k(
        answering_18.base_url, sample=True, num_questions=4, max_tokens=2, concurrency=concurrency
    )
    assert [q.text for q in result.questions] == ["18"] * 4
    assert [q.index for q in result.questions] == [0, 1, 2, 3]
    assert result.questions[0].correct and not any(q.correct for q in result.questions[1:])
    assert result.accuracy == 0.25
    assert result.invalid_rate == 0.0
    assert result.output_tokens == 8
    assert result.concurrency == concurrency
    assert result.latency_s > 0 and result.questions_per_s > 0 and result.output_tokens_per_s > 0
    assert all(q.finish_reason == "length" for q in result.questions)
    assert answering_18.engine.requests_added >= 4


async def test_evaluate_async_with_a_model_name(answering_18: RustFrontend) -> None:
    result = await evaluate_gsm8k_async(
        answering_18.base_url,
        sample=True,
        num_questions=2,
        max_tokens=1,
        model=answering_18.model,
        progress=False,
    )
    assert result.texts == ["1", "1"]
    assert result.invalid_rate == 0.0 and result.accuracy == 0.0


def test_progress_bar_counts_every_question(
    answering_18: RustFrontend, capsys: pytest.CaptureFixture[str]
) -> None:
    evaluate_gsm8k(answering_18.base_url, sample=True, num_questions=3, max_tokens=1, progress=True)
    assert "3/3" in capsys.readouterr().err


async def test_concurrency_caps_requests_in_flight() -> None:
    in_flight = peak = 0

    async def handler(request: httpx.Request) -> httpx.Response:
        nonlocal in_flight, peak
        if request.url.path == "/v1/models":
            return httpx.Response(200, json=MODELS)
        in_flight += 1
        peak = max(peak, in_flight)
        await asyncio.sleep(0.01)
        in_flight -= 1
        return httpx.Response(200, json={"choices": [{"text": " 42", "finish_reason": "stop"}], "usage": {}})

    train, test = _sample()
    prompts = build_prompts(train, test, 12)
    for limit, expected in ((2, 2), (1, 1), (None, 12)):
        peak = 0
        async with httpx.AsyncClient(
            base_url="http://vllm.test", transport=httpx.MockTransport(handler)
        ) as c:
            result = await evaluate_gsm8k_async(
                prompts=prompts, concurrency=limit, http_client=c, progress=False
            )
        assert peak == expected
        assert result.num_questions == 12 and result.output_tokens == 0


async def test_spread_sends_the_requests_evenly_over_the_window() -> None:
    import time

    sent: list[float] = []

    async def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/models":
            return httpx.Response(200, json=MODELS)
        sent.append(time.perf_counter())
        await asyncio.sleep(0.3)  # every request still in flight when the last one leaves
        return httpx.Response(200, json={"choices": [{"text": " 42", "finish_reason": "stop"}], "usage": {}})

    train, test = _sample()
    prompts = build_prompts(train, test, 5)
    async with httpx.AsyncClient(base_url="http://vllm.test", transport=httpx.MockTransport(handler)) as c:
        result = await evaluate_gsm8k_async(prompts=prompts, http_client=c, progress=False, spread_s=0.5)
        with pytest.raises(InvalidParameterError, match="spread_s"):
            await evaluate_gsm8k_async(prompts=prompts, http_client=c, progress=False, spread_s=-1)
    gaps = [b - a for a, b in zip(sorted(sent), sorted(sent)[1:], strict=False)]
    assert result.num_questions == 5 and len(gaps) == 4 and all(g >= 0.09 for g in gaps)


async def test_failed_requests_count_as_invalid_answers_with_the_error_kept() -> None:
    train, test = _sample()
    prompts = build_prompts(train, test, 3)

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/models":
            return httpx.Response(200, json=MODELS)
        if b"Janet" in request.content:  # question 0
            return httpx.Response(404, json={"error": {"message": "model not found"}})
        if b"robe" in request.content:  # question 1
            return httpx.Response(200, json={"nothing": True})
        return httpx.Response(200, json={"choices": [{"text": " 70,000"}], "usage": {"completion_tokens": 2}})

    async with httpx.AsyncClient(base_url="http://vllm.test", transport=httpx.MockTransport(handler)) as c:
        result = await evaluate_gsm8k_async(prompts=prompts, http_client=c, progress=False)
    assert result.failed_requests == 2 and result.failed_rate == pytest.approx(2 / 3)
    q0, q1, q2 = result.questions
    assert q0.text == "" and q0.prediction is None and q0.error is not None and "NotFoundError" in q0.error
    assert q1.error is not None and "ResponseValidationError" in q1.error
    assert q2.error is None and q2.correct  # 70000 is the answer to the third question
    assert result.invalid_rate == pytest.approx(2 / 3) and result.errors[0].startswith("NotFoundError")


async def test_no_served_model_is_a_setup_error() -> None:
    train, test = _sample()

    def no_models(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"object": "list", "data": []})

    async with httpx.AsyncClient(base_url="http://vllm.test", transport=httpx.MockTransport(no_models)) as c:
        with pytest.raises(DevClientError, match="no model"):
            await evaluate_gsm8k_async(prompts=build_prompts(train, test, 1), http_client=c, progress=False)


async def test_a_503_is_retried_a_500_is_not() -> None:
    train, test = _sample()
    prompts = build_prompts(train, test, 2)
    calls: dict[int, int] = {0: 0, 1: 0}

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/models":
            return httpx.Response(200, json=MODELS)
        index = 0 if b"Janet" in request.content else 1
        calls[index] += 1
        if index == 0 and calls[0] <= 2:  # refused twice before any work, then answered
            return httpx.Response(503, json={"error": {"message": "overloaded"}})
        if index == 1:
            return httpx.Response(500, json={"error": {"message": "engine step failed"}})
        return httpx.Response(200, json={"choices": [{"text": " 18"}], "usage": {"completion_tokens": 1}})

    async with httpx.AsyncClient(base_url="http://vllm.test", transport=httpx.MockTransport(handler)) as c:
        result = await evaluate_gsm8k_async(prompts=prompts, http_client=c, progress=False, retry_delay=0.001)
    q0, q1 = result.questions
    assert calls == {0: 3, 1: 1}  # a completion is not idempotent: only the 503 (no work done) is resent
    assert q0.correct and q0.attempts == 3 and q0.error is None
    assert q1.error is not None and "500" in q1.error and q1.attempts == 1
    assert result.retried_requests == 1 and result.failed_requests == 1


async def test_503s_without_end_fail_the_question_after_the_retries() -> None:
    train, test = _sample()

    def refuse(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/models":
            return httpx.Response(200, json=MODELS)
        return httpx.Response(503, json={"error": {"message": "overloaded"}})

    async with httpx.AsyncClient(base_url="http://vllm.test", transport=httpx.MockTransport(refuse)) as c:
        result = await evaluate_gsm8k_async(
            prompts=build_prompts(train, test, 1),
            http_client=c,
            progress=False,
            retries_503=2,
            retry_delay=0.001,
        )
    (q,) = result.questions
    assert q.attempts == 3 and q.error is not None and "503" in q.error


def test_progress_bar_only_on_a_terminal(
    answering_18: RustFrontend, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    evaluate_gsm8k(
        answering_18.base_url, sample=True, num_questions=2, max_tokens=1
    )  # stderr is captured: no terminal
    assert "2/2" not in capsys.readouterr().err
    monkeypatch.setattr("sys.stderr.isatty", lambda: True)
    evaluate_gsm8k(answering_18.base_url, sample=True, num_questions=2, max_tokens=1)
    assert "2/2" in capsys.readouterr().err


def test_a_base_url_ending_in_v1_is_passed_to_the_client(answering_18: RustFrontend) -> None:
    assert not DevClient("http://x/v1").base_url.endswith("/v1")
    result = evaluate_gsm8k(
        answering_18.base_url + "/v1", sample=True, num_questions=2, max_tokens=2, progress=False
    )
    assert result.failed_requests == 0 and result.texts == ["18", "18"]


async def test_requests_go_through_the_client() -> None:
    train, test = _sample()
    agents: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        agents.append(request.headers.get("user-agent", ""))
        if request.url.path == "/v1/models":
            return httpx.Response(200, json=MODELS)
        return httpx.Response(200, json={"choices": [{"text": " 1"}]})

    async with httpx.AsyncClient(base_url="http://vllm.test", transport=httpx.MockTransport(handler)) as c:
        await evaluate_gsm8k_async(prompts=build_prompts(train, test, 2), http_client=c, progress=False)
    assert agents and all(a.startswith("vllm-devclient/") for a in agents)


async def test_model_comes_from_v1_models_unless_given() -> None:
    # vLLM 0.26's Rust frontend answers 400 "missing field `model`" to a completion without one.
    sent: list[str | None] = []

    def strict(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/models":
            return httpx.Response(200, json=MODELS)
        model = json.loads(request.content).get("model")
        sent.append(model)
        if model is None:
            return httpx.Response(400, text="Failed to deserialize the JSON body: missing field `model`")
        return httpx.Response(200, json={"choices": [{"text": " 18"}], "usage": {"completion_tokens": 1}})

    train, test = _sample()
    prompts = build_prompts(train, test, 2)
    async with httpx.AsyncClient(base_url="http://vllm.test", transport=httpx.MockTransport(strict)) as c:
        auto = await evaluate_gsm8k_async(prompts=prompts, http_client=c, progress=False)
        given = await evaluate_gsm8k_async(prompts=prompts, http_client=c, progress=False, model="other")
    assert sent == ["/models/smol", "/models/smol", "other", "other"]
    assert auto.accuracy == 0.5 and given.output_tokens == 2


async def test_bad_arguments() -> None:
    with pytest.raises(InvalidParameterError, match="concurrency"):
        await evaluate_gsm8k_async("http://x", concurrency=0)
    with pytest.raises(InvalidParameterError, match="base_url, client or http_client"):
        await evaluate_gsm8k_async(num_questions=1)


def test_stop_strings_are_vllms() -> None:
    assert STOP == ("Question", "Assistant:", "<|separator|>")
