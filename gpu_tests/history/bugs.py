"""The real vLLM offload bugs the check is graded on (issue 35), as data; ``PORTING.md`` §5 is the research
each entry rests on (source lines per release, scenario, evidence).

A :class:`Bug` names its buggy release (the newest with the bug) and its fixed one (the first without), the
scenario that meets it the way users met it (cases of the ordinary check: profiles, connector, concurrency,
iterations), and its evidence: the general assertions of the judge whose failure shows it. None of them was
written for the bug; a known defect of ``offload_check/defects.py`` may name a failure, never make one. A
timing bug is graded as a rate: k of N iterations at a stated concurrency, on both releases.

``gpu_tests/runner/grade.py`` makes the bug x release table from the committed history runs;
``gpu_tests/runner/history_plan.py`` plans the cases per release.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["BUGS", "HUNTS", "Bug", "Hunt", "Scenario"]


@dataclass(frozen=True)
class Scenario:
    """Cases of the check that meet a bug: each profile at each concurrency, ``iterations`` clean passes.

    ``label`` tells a case apart from the clean matrix's case of the same profile (``""``: it is that case,
    shared). ``check_args`` are check options beyond the runner's (a step the check must offer; a case whose
    option the check lacks is listed as not runnable)."""

    name: str
    description: str
    profiles: tuple[str, ...]
    connector: str  # offloading | simple
    concurrencies: tuple[int, ...] = (1,)
    iterations: int = 1
    num_questions: int | None = None  # None: the profile's; with concurrency above it, the concurrency
    check_args: tuple[str, ...] = ()
    label: str = ""

    def case_label(self, concurrency: int) -> str:
        parts = [self.label] if self.label else []
        if len(self.concurrencies) > 1 or concurrency != 1:
            parts.append("all-at-once" if concurrency == 0 else f"c{concurrency}")
        return "-".join(parts)


@dataclass(frozen=True)
class Bug:
    id: str
    title: str
    url: str
    buggy: str  # the newest release with the bug
    fixed: str  # the first release without it
    present: tuple[str, ...]  # every graded release whose source has it (PORTING.md §5-6)
    families: tuple[str, ...]  # the tiny families whose clean cases can meet it (the clean-matrix table)
    scenario: Scenario
    evidence: tuple[str, ...]  # judge assertions whose failure is the evidence
    timing: bool = False  # graded as a rate over the scenario's iterations
    note: str = ""


_ALIGN = Scenario(
    "align-boundary",
    "Mamba align mode, OffloadingConnector, HMA on: warm pass, GPU-only reset, reload of the boundary "
    "probes (prompts of exactly k*B tokens) and the GSM8K prompts; concurrency 1",
    ("tiny-qwen3-next", "tiny-nemotron-h-align", "tiny-falcon-h1-align"),
    "offloading",
)
_RESET = Scenario(
    "full-reset-cold",
    "the check's own sequence: a full reset (reset_external=true), then cold runs that must load nothing",
    ("tiny-llama",),
    "offloading",
)
_SIMPLE_RESET = Scenario(
    "simple-full-reset",
    "the Simple connector's full reset (reset_external=true), the check's first step, then cold runs",
    ("tiny-llama",),
    "simple",
)

_SIMPLE_IN_FLIGHT = Scenario(
    "simple-in-flight",
    "the Simple connector with 64 and 256 requests in flight (async scheduling, the default), "
    "repeated to measure a rate",
    ("tiny-llama",),
    "simple",
    concurrencies=(64, 256),
    iterations=5,
)
_HYBRID_ALL_AT_ONCE = Scenario(
    "hybrid-all-at-once",
    "a hybrid attention+Mamba model, OffloadingConnector: the reload with every request in flight, "
    "so the compute stream is busy when a load starts; repeated to measure a rate",
    ("tiny-qwen3-next", "tiny-nemotron-h"),
    "offloading",
    concurrencies=(0,),
    iterations=5,
)

BUGS: tuple[Bug, ...] = (
    Bug(
        "vllm-pr44599",
        "Mamba align mode, a prompt on a chunk boundary: the restored state already holds its last token",
        "https://github.com/vllm-project/vllm/pull/44599",
        buggy="0.23.0",
        fixed="0.24.0",
        present=("0.23.0",),
        families=("qwen3-next", "nemotron-h", "falcon-h1"),
        scenario=_ALIGN,
        evidence=("recurrent_state_consistent", "answers_unchanged", "kv_bytes_identical"),
    ),
    Bug(
        "vllm-issue45268",
        "Mamba align mode: the scheduler asserts on the first CPU hit and the engine dies (PR #42554)",
        "https://github.com/vllm-project/vllm/issues/45268",
        buggy="0.22.0",
        fixed="0.23.0",
        present=("0.20.2", "0.22.0"),
        families=("qwen3-next", "nemotron-h", "falcon-h1"),
        scenario=_ALIGN,
        evidence=("requests_ok",),
    ),
    Bug(
        "vllm-pr41956",
        "reset_prefix_cache(reset_external=True) answers success while the OffloadingConnector's CPU tier "
        "keeps serving",
        "https://github.com/vllm-project/vllm/pull/41956",
        buggy="0.20.2",
        fixed="0.22.0",
        present=("0.20.2",),
        families=("llama",),
        scenario=_RESET,
        evidence=("reload_proven",),
    ),
    Bug(
        "vllm-pr39726",
        "SimpleCPUOffloadConnector.reset_cache() raises NotImplementedError: the full reset answers 500 and "
        "the CPU tier stays full",
        "https://github.com/vllm-project/vllm/pull/39726",
        buggy="0.23.0",
        fixed="0.24.0",
        present=("0.20.2", "0.22.0", "0.23.0"),
        # the connector's own reset: every model it serves
        families=("llama", "gemma3", "gemma4", "deepseek-v2", "qwen3-next", "nemotron-h", "falcon-h1"),
        scenario=_SIMPLE_RESET,
        evidence=("reload_proven", "resets_honoured"),
        note="caught only where the check goes on after a refused full reset (its cold runs then load); "
        "where it stops, the cell is the case's error, not an assertion",
    ),
    Bug(
        "vllm-issue45704",
        "SimpleCPUOffloadConnector stores GPU blocks to the CPU with no barrier on the compute stream "
        "(PR #46278)",
        "https://github.com/vllm-project/vllm/issues/45704",
        buggy="0.23.0",
        fixed="0.24.0",
        present=("0.20.2", "0.22.0", "0.23.0"),
        families=("llama",),
        scenario=_SIMPLE_IN_FLIGHT,
        evidence=("kv_bytes_identical", "answers_unchanged"),
        timing=True,
        note="on 0.23.0 the Simple connector's full reset raises (vllm-pr39726) first; PORTING.md reads tiny "
        "models as rarely GPU-bound, a real-size profile raises the odds",
    ),
    Bug(
        "vllm-skip-zero-block-ids",
        "blocks zeroed for Mamba models wipe an async load landing in the same step (_skip_zero_block_ids, "
        "0.26.0)",
        "https://github.com/vllm-project/vllm/compare/v0.25.1...v0.26.0",
        buggy="0.25.1",
        fixed="0.26.0",
        present=("0.20.2", "0.22.0", "0.23.0", "0.24.0", "0.25.0", "0.25.1"),
        families=("qwen3-next", "nemotron-h", "falcon-h1"),
        scenario=_HYBRID_ALL_AT_ONCE,
        evidence=("kv_bytes_identical", "answers_unchanged"),
        timing=True,
    ),
    Bug(
        "vllm-pr48102",
        "OffloadingConnector reset_cache() with a request running keeps its stale transfer_jobs: the request "
        "hangs or the engine dies",
        "https://github.com/vllm-project/vllm/pull/48102",
        buggy="0.25.1",
        fixed="0.26.0",
        present=("0.22.0", "0.23.0", "0.24.0", "0.25.0", "0.25.1"),
        families=("llama",),
        scenario=Scenario(
            "reset-under-load",
            "a full reset while long chunked prefills are storing, then the requests finish",
            ("tiny-llama",),
            "offloading",
            iterations=3,
            # 8 long prompts at once; a small batch budget keeps their prefill storing over many steps.
            check_args=("--reset-under-load", "8", "--server-arg", "--max-num-batched-tokens 512"),
            label="reset-under-load",
        ),
        evidence=("requests_ok",),
    ),
)


@dataclass(frozen=True)
class Hunt:
    """A bug reported present in a served release that no graded release fixes: its scenario runs on
    ``release`` and what the check's general assertions show there is reported, not graded."""

    id: str
    title: str
    url: str
    release: str
    scenario: Scenario
    evidence: tuple[str, ...]


HUNTS: tuple[Hunt, ...] = (
    Hunt(
        "vllm-issue47282",
        "SimpleCPUOffloadConnector loads with no barrier against the compute stream still reading the "
        "destination blocks (write-after-read; the load-side twin of #45704)",
        "https://github.com/vllm-project/vllm/issues/47282",
        release="0.26.0",
        scenario=_SIMPLE_IN_FLIGHT,
        evidence=("kv_bytes_identical", "answers_unchanged"),
    ),
    Hunt(
        "vllm-cross-step-zeroing",
        "blocks zeroed for Mamba models in one step wipe an async load that lands in a later step (the "
        "cross-step variant of the _skip_zero_block_ids bug)",
        "https://github.com/vllm-project/vllm/compare/v0.25.1...v0.26.0",
        release="0.26.0",
        scenario=_HYBRID_ALL_AT_ONCE,
        evidence=("kv_bytes_identical", "answers_unchanged"),
    ),
)
