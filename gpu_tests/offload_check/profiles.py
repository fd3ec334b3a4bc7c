"""Model profiles of the offload matrix: upstream's real models, per connector, and the tiny families.

``python -c "from gpu_tests.offload_check.profiles import PROFILES; print(PROFILES)"`` shows each
profile's accuracy threshold and CPU tier size per connector. The real profiles are upstream's matrix
exactly (:mod:`.upstream` holds the recorded copy, with its source commit; a CI test compares the two); the
``tiny-*`` profiles are this project's, one per family of :data:`.tiny.TINY_FAMILIES`, with no threshold
(random weights answer nothing right) and a small CPU tier. :data:`TINY_PARALLEL` adds tiny stand-ins for
upstream's several-GPU cases (``tiny-<family>-tp<N>-ep``): the same tiny model, served with tensor and expert
parallelism and the large step's KV flags.

A tiny profile's ``model`` is ``tiny:<family>``: :func:`resolve_model` maps it to
``$VLLM_DEVCLIENT_TINY_DIR/<family>`` when a case runs (never at import).

:func:`real_size_profile` makes, from an upstream profile, the one that runs it at real size on one GPU with
dummy weights (``<name>-real``, ``<name>-real-tp1`` where upstream's tensor-parallel size is overridden, so
the override shows in the case id and the report's ``gpus_used`` and ``server_args``): upstream's connectors,
CPU sizes, spec and flags, plus :data:`REAL_SIZE_ARGS`; model ``real:<name>``, which :func:`resolve_model`
maps to ``$VLLM_DEVCLIENT_REAL_DIR/<name>`` (the folders ``gpu_tests/runner/real_models.py`` writes).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from vllm_devclient import InvalidParameterError

from . import upstream
from .server import CONNECTORS, FRONTENDS, Connector, Frontend
from .tiny import TINY_FAMILIES

__all__ = [
    "ALIGN_FAMILIES",
    "CONNECTOR_SHORT",
    "PROFILES",
    "REAL_DIR_ENV",
    "REAL_SIZE_ARGS",
    "SMALL_MODEL_ENV",
    "TINY_DIR_ENV",
    "TINY_PARALLEL",
    "CheckCase",
    "ConnectorSettings",
    "ModelProfile",
    "case_skip_reason",
    "connector_by_name",
    "gpu_count",
    "matrix",
    "model_available",
    "real_size_profile",
    "resolve_model",
]

TINY_DIR_ENV = "VLLM_DEVCLIENT_TINY_DIR"
SMALL_MODEL_ENV = "VLLM_DEVCLIENT_SMALL_MODEL"
REAL_DIR_ENV = "VLLM_DEVCLIENT_REAL_DIR"
CONNECTOR_SHORT: dict[Connector, str] = {
    "OffloadingConnector": "offloading",
    "SimpleCPUOffloadConnector": "simple",
}


@dataclass(frozen=True)
class ConnectorSettings:
    """What a profile uses with one connector."""

    threshold: float | None
    cpu_gib: float
    spec_name: str | None = None  # OffloadingConnector: None is CPUOffloadingSpec
    upstream_id: str | None = None  # the id of the case in upstream's MODELS


@dataclass(frozen=True)
class ModelProfile:
    """One model of the matrix and what it needs: per connector thresholds and CPU tier, server flags."""

    name: str
    model: str
    family: str
    architectures: tuple[str, ...]
    connectors: Mapping[Connector, ConnectorSettings]
    tolerance: float = 0.05
    gpus: int = 1
    server_args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    startup_timeout: float = 600.0
    num_questions: int = upstream.NUM_QUESTIONS
    num_shots: int = upstream.NUM_FEWSHOT
    max_tokens: int = 256
    served_model_name: str | None = None
    offload_block_size: int | None = None
    ci_step: str | None = None
    tiny: bool = False
    self_describing_events: bool = False
    concurrency: int = 1  # requests in flight per run; 0: all at once
    real_size_of: str | None = None  # the upstream profile this one runs at real size

    def settings(self, connector: Connector) -> ConnectorSettings:
        try:
            return self.connectors[connector]
        except KeyError:
            raise InvalidParameterError(
                f"profile {self.name} has no {connector} case (it has {sorted(self.connectors)})"
            ) from None

    def threshold(self, connector: Connector) -> float | None:
        return self.settings(connector).threshold

    def cpu_gib(self, connector: Connector) -> float:
        return self.settings(connector).cpu_gib


def _tp(args: Iterable[str]) -> int:
    items = list(args)
    return int(items[items.index("--tensor-parallel-size") + 1]) if "--tensor-parallel-size" in items else 1


def _upstream_profile(name: str, family: str, architectures: tuple[str, ...], ci_step: str) -> ModelProfile:
    """A real-model profile, every value taken from the recorded upstream cases of one model."""
    cases = [c for c in upstream.UPSTREAM_CASES if c.id.endswith(name)]
    if not cases:
        raise AssertionError(f"no upstream case ends with {name}")
    first = cases[0]
    if any(c.model != first.model or c.extra_server_args != first.extra_server_args for c in cases):
        raise AssertionError(f"upstream cases of {name} differ in model or server flags")
    return ModelProfile(
        name=name,
        model=first.model,
        family=family,
        architectures=architectures,
        connectors={
            c.connector: ConnectorSettings(  # type: ignore[misc]
                threshold=c.accuracy_threshold,
                cpu_gib=float(c.cpu_offload_gib),
                spec_name=None if c.spec_name == "CPUOffloadingSpec" else c.spec_name,
                upstream_id=c.id,
            )
            for c in cases
        },
        tolerance=first.tolerance,
        gpus=_tp(first.extra_server_args),
        server_args=(*upstream.COMMON_SERVER_ARGS, *first.extra_server_args),
        startup_timeout=float(first.startup_timeout),
        ci_step=ci_step,
    )


# Upstream's kv-offload-large flags beyond the parallel sizes (DeepSeek-V4-Flash: fp8 KV, block size 256).
LARGE_STEP_KV_ARGS = ("--kv-cache-dtype", "fp8", "--block-size", "256")
# (family, tensor-parallel size): the several-GPU stand-ins. DeepSeek-V4 is the large step's own
# architecture; DeepSeek-V2 (MLA + MoE) is the one that runs on the payload's vLLM (V4 needs DeepGEMM).
TINY_PARALLEL: tuple[tuple[str, int], ...] = (("deepseek-v2", 2), ("deepseek-v2", 4), ("deepseek-v4", 4))


# Families whose tiny model runs in Mamba ``all`` mode by default (they implement SupportsMambaPrefixCaching):
# each also gets a ``tiny-<family>-align`` profile, served with ``--mamba-cache-mode align`` (qwen3-next is in
# align mode already), so both modes' boundary behaviour is checked (vLLM PR #44599 is align's, #51094 all's).
ALIGN_FAMILIES: tuple[str, ...] = ("nemotron-h", "falcon-h1")


def _tiny_profile(
    family: str, *, tiny_cpu_gib: float = 0.5, tensor_parallel: int = 1, align: bool = False
) -> ModelProfile:
    fam = TINY_FAMILIES[family]
    parallel: tuple[str, ...] = ()
    name = f"tiny-{family}"
    if align:
        name += "-align"
        parallel = ("--mamba-cache-mode", "align")
    if tensor_parallel > 1:
        name += f"-tp{tensor_parallel}-ep"
        parallel = ("--tensor-parallel-size", str(tensor_parallel), "--enable-expert-parallel")
        if "--kv-cache-dtype" not in fam.server_args:  # DeepSeek-V4's family flags have them already
            parallel += LARGE_STEP_KV_ARGS
    return ModelProfile(
        name=name,
        model=f"tiny:{family}",
        family=family,
        architectures=fam.architectures,
        connectors={c: ConnectorSettings(threshold=None, cpu_gib=tiny_cpu_gib) for c in CONNECTORS},
        gpus=tensor_parallel,
        server_args=(*upstream.COMMON_SERVER_ARGS, "--dtype", "bfloat16", *fam.server_args, *parallel),
        startup_timeout=600.0,
        num_questions=16,
        num_shots=upstream.NUM_FEWSHOT,
        max_tokens=64,
        served_model_name=name,
        tiny=True,
        self_describing_events=True,
    )


# Flags a real-size profile adds to upstream's, each needed offline (gpu_tests/real_configs/README.md): dummy
# weights, the payload's attention/kernel choices proven by the tiny family, and no multimodal towers (the
# stand-in tokenizer has no image or audio tokens, so the processor could not be built).
REAL_SIZE_ARGS: dict[str, tuple[str, ...]] = {
    "nemotron-h-8b": ("--load-format", "dummy", *TINY_FAMILIES["nemotron-h"].server_args),
    "gemma-4-e4b-it": (
        "--load-format",
        "dummy",
        *TINY_FAMILIES["gemma4"].server_args,
        "--language-model-only",
    ),
    "qwen3.5-35b": (
        "--load-format",
        "dummy",
        *TINY_FAMILIES["qwen3-next"].server_args,
        "--language-model-only",
    ),
    "deepseek-v2-lite-tiering-tp2": ("--load-format", "dummy", *TINY_FAMILIES["deepseek-v2"].server_args),
}
# The seeded dummy initialiser (gpu_tests/runner/tiny_init.py) draws on the GPU: billions of weights.
REAL_SIZE_ENV: Mapping[str, str] = {"VLLM_DEVCLIENT_DUMMY_ON_DEVICE": "1"}


def _with_tp(args: Sequence[str], tp: int) -> tuple[str, ...]:
    items = list(args)
    if "--tensor-parallel-size" in items:
        items[items.index("--tensor-parallel-size") + 1] = str(tp)
    return tuple(items)


def real_size_profile(upstream_name: str, tp: int = 1) -> ModelProfile:
    """Upstream's profile at real size with dummy weights on ``tp`` GPUs: its connectors, CPU sizes, spec,
    flags and questions; no threshold (random weights answer nothing right); all questions at once."""
    base = PROFILES[upstream_name]
    if upstream_name not in REAL_SIZE_ARGS:
        raise InvalidParameterError(
            f"no real-size config for {upstream_name}: known are {sorted(REAL_SIZE_ARGS)}"
        )
    name = f"{upstream_name}-real" + (f"-tp{tp}" if tp != base.gpus else "")
    return replace(
        base,
        name=name,
        model=f"real:{upstream_name}",
        connectors={c: replace(s, threshold=None) for c, s in base.connectors.items()},
        gpus=tp,
        server_args=(*_with_tp(base.server_args, tp), *REAL_SIZE_ARGS[upstream_name]),
        env={**base.env, **REAL_SIZE_ENV},
        served_model_name=name,
        ci_step=None,
        concurrency=0,
        real_size_of=upstream_name,
    )


def _build_profiles() -> dict[str, ModelProfile]:
    profiles: dict[str, ModelProfile] = {
        # One-GPU smoke profile: SmolLM2-135M (dense Llama). GSM8K accuracy is near 0, so no threshold.
        "small": ModelProfile(
            name="small",
            model="HuggingFaceTB/SmolLM2-135M-Instruct",
            family="llama",
            architectures=("LlamaForCausalLM",),
            connectors={c: ConnectorSettings(threshold=None, cpu_gib=1.0) for c in CONNECTORS},
            server_args=(
                *upstream.COMMON_SERVER_ARGS,
                "--dtype",
                "bfloat16",
                "--attention-backend",
                "FLASH_ATTN",
            ),
            startup_timeout=300.0,
            num_questions=24,
        ),
        "nemotron-h-8b": _upstream_profile(
            "nemotron-h-8b", "nemotron-h", ("NemotronHForCausalLM",), "kv-offload-small"
        ),
        "gemma-4-e4b-it": _upstream_profile(
            "gemma-4-e4b-it", "gemma4", ("Gemma4ForConditionalGeneration",), "kv-offload-small"
        ),
        "qwen3.5-35b": _upstream_profile(
            "qwen3.5-35b", "qwen3-next", ("Qwen3_5MoeForConditionalGeneration",), "kv-offload-medium"
        ),
        "deepseek-v2-lite-tiering-tp2": _upstream_profile(
            "deepseek-v2-lite-tiering-tp2", "deepseek-v2", ("DeepseekV2ForCausalLM",), "kv-offload-medium"
        ),
        "deepseek-v4-flash": _upstream_profile(
            "deepseek-v4-flash", "deepseek-v4", ("DeepseekV4ForCausalLM",), "kv-offload-large"
        ),
    }
    for family in TINY_FAMILIES:
        profile = _tiny_profile(family)
        profiles[profile.name] = profile
    for family, tp in TINY_PARALLEL:
        profile = _tiny_profile(family, tensor_parallel=tp)
        profiles[profile.name] = profile
    for family in ALIGN_FAMILIES:
        profile = _tiny_profile(family, align=True)
        profiles[profile.name] = profile
    return profiles


PROFILES: dict[str, ModelProfile] = _build_profiles()
for _name in REAL_SIZE_ARGS:
    _profile = real_size_profile(_name)
    PROFILES[_profile.name] = _profile


def connector_by_name(name: str) -> Connector:
    """``OffloadingConnector``/``SimpleCPUOffloadConnector``, or the short ``offloading``/``simple``."""
    key = name.strip()
    for connector, short in CONNECTOR_SHORT.items():
        if key in (connector, short) or key.lower() == short:
            return connector
    raise InvalidParameterError(f"unknown connector {name!r}: use one of {CONNECTORS} (or offloading/simple)")


@dataclass(frozen=True)
class CheckCase:
    """One cell of the matrix: profile x connector x frontend, plus a label for variants (mutation...)."""

    profile: ModelProfile
    connector: Connector
    frontend: Frontend
    connector_extra: Mapping[str, Any] = field(default_factory=dict)
    label: str = ""
    env: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.frontend not in FRONTENDS:
            raise InvalidParameterError(f"unknown frontend {self.frontend!r}: use one of {FRONTENDS}")
        self.profile.settings(self.connector)

    @property
    def id(self) -> str:
        base = f"{self.profile.name}-{CONNECTOR_SHORT[self.connector]}-{self.frontend}"
        return f"{base}-{self.label}" if self.label else base

    @property
    def settings(self) -> ConnectorSettings:
        return self.profile.settings(self.connector)

    @property
    def self_describing_events(self) -> bool:
        """Self-describing CPU events: asked for by the connector extra, or the profile's python case."""
        if "self_describing_kv_events" in self.connector_extra:
            return bool(self.connector_extra["self_describing_kv_events"])
        return (
            self.profile.self_describing_events
            and self.connector == "OffloadingConnector"
            and self.frontend == "python"
            and not self.label
        )


def matrix(
    profiles: Iterable[str] | None = None,
    connectors: Iterable[Connector] = CONNECTORS,
    frontends: Iterable[Frontend] = FRONTENDS,
) -> list[CheckCase]:
    """Every (profile, connector, frontend) case the profiles define; ``profiles=None``: upstream's own."""
    names = (
        [n for n, p in PROFILES.items() if not p.tiny and p.real_size_of is None]
        if profiles is None
        else list(profiles)
    )
    unknown = [n for n in names if n not in PROFILES]
    if unknown:
        raise InvalidParameterError(f"unknown profiles {unknown}: known are {sorted(PROFILES)}")
    wanted = list(connectors)
    return [
        CheckCase(PROFILES[n], c, f)
        for n in names
        for c in wanted
        if c in PROFILES[n].connectors
        for f in frontends
    ]


def resolve_model(profile: ModelProfile, env: Mapping[str, str] | None = None) -> str:
    """The model to serve: ``tiny:<family>`` -> ``$VLLM_DEVCLIENT_TINY_DIR/<family>`` (default
    ``out/tiny_models``); the ``small`` profile honours ``$VLLM_DEVCLIENT_SMALL_MODEL``."""
    environ = os.environ if env is None else env
    for prefix, key, default in (
        ("tiny:", TINY_DIR_ENV, "tiny_models"),
        ("real:", REAL_DIR_ENV, "real_models"),
    ):
        if profile.model.startswith(prefix):
            root = environ.get(key) or str(Path("out") / default)
            return str(Path(root) / profile.model.split(":", 1)[1])
    if profile.name == "small" and environ.get(SMALL_MODEL_ENV):
        return environ[SMALL_MODEL_ENV]
    return profile.model


def case_skip_reason(case: CheckCase, *, gpu_count: int, model_available: bool) -> str | None:
    """Why a case cannot run here (None: it can)."""
    p = case.profile
    if gpu_count < p.gpus:
        return f"{p.model} ({p.family}) needs {p.gpus} GPUs, this machine has {gpu_count}"
    if not model_available:
        return f"{p.model} is not available offline (not a local folder nor in the HF cache)"
    return None


def gpu_count() -> int:
    """NVIDIA GPUs visible here (nvidia-smi; 0 when there is none or no driver)."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return 0
    try:
        out = subprocess.run([exe, "-L"], capture_output=True, text=True, timeout=30, check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return 0
    count = sum(1 for line in out.splitlines() if line.startswith("GPU "))
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        count = min(count, len([v for v in visible.split(",") if v.strip()]))
    return count


def model_available(model: str) -> bool:
    """A local folder, or (offline) in the Hugging Face cache; online, anything may be downloaded."""
    if Path(model).is_dir():
        return True
    if model.startswith(("tiny:", "real:")) or Path(model).is_absolute():
        return False
    offline = os.environ.get("HF_HUB_OFFLINE", "0").lower() in ("1", "true", "yes")
    if not offline:
        return True
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        return False
    return isinstance(try_to_load_from_cache(model, "config.json"), str)
