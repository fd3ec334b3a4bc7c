"""What SkyRL, prime-rl, TRL and verl send to vLLM at each step of a weight sync, transcribed from their
source (the commit in `FRAMEWORKS`, the file and function in each step's `source`), and the SDK calls that do
the step. The runner (`tools.rl_frameworks.runner`) sends both to the real frontends and records what
happened; nothing here is an outcome.

A framework's step is its HTTP requests to each server, in order (`sends`), or, for verl, which drives vLLM in
its own process, the engine calls its `AsyncLLM` calls make (`in_process`: the utility and its arguments by
vLLM 0.34's names, `AsyncLLM`'s defaults filled in). Values a trainer computes (addresses, tensor metadata,
paths) are examples shared by every framework and the SDK (`VALUES`); per-server values are `Expr`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from .spec import Call, Engine, Expr, Framework, FrameworkStep, Ref, Send, Source, Step

__all__ = ["ADAPTER", "FRAMEWORKS", "STEPS", "VALUES"]

FRAMEWORKS: Mapping[str, Framework] = {
    "skyrl": Framework(
        "SkyRL",
        "NovaSky-AI/SkyRL",
        "a9564572eb8e91076be43c1bd5e4615e3de17265",
        "aiohttp, no timeout (`ClientTimeout(total=None)`); control routes fanned out to every server",
    ),
    "prime_rl": Framework(
        "prime-rl",
        "PrimeIntellect-ai/prime-rl",
        "559b44772e471d1538537b8805cc77f3824a5e64",
        "httpx, `Timeout(None)`; admin routes retried with a read timeout per try (tenacity)",
    ),
    "trl": Framework(
        "TRL",
        "huggingface/trl",
        "f2cd57710ae345ea6428ae95363267fcf38a3dc8",
        "`requests`, one server; status codes not checked",
    ),
    "verl": Framework(
        "verl",
        "verl-project/verl",
        "1dda039b9c6311889a9c9a26040677e1254814f9",
        "vLLM's `AsyncLLM` in its own process (no HTTP)",
    ),
}

# Where the runner puts the kit's LoRA adapter directory (it differs between machines; the JSON keeps this).
ADAPTER = "{adapter}"

VALUES: Mapping[str, Any] = {
    "master_address": "127.0.0.1",
    "master_port": 29500,
    "update_info": {"names": ["w"], "dtype_names": ["float32"], "shapes": [[2]], "packed": True},
    "nccl_init": {
        "master_address": Ref("master_address"),
        "master_port": Ref("master_port"),
        "rank_offset": 1,
        "world_size": Expr("1 + total"),
    },
    "weight_dir": "/broadcast/step_1",
    "lora_name": "policy-lora",
    "adapter": ADAPTER,
}

_TRL = "trl/experimental/async_grpo/"
_SKYRL = "skyrl/backends/skyrl_train/inference_servers/remote_inference_client.py"
_PRIME = "src/prime_rl/utils/client.py"
_VERL = "verl/workers/rollout/vllm_rollout/vllm_async_server.py"


def _init_info(rank_offset: Any, world_size: Any) -> dict[str, Any]:
    return {
        "init_info": {
            "master_address": Ref("master_address"),
            "master_port": Ref("master_port"),
            "rank_offset": rank_offset,
            "world_size": world_size,
        }
    }


_READY = Step(
    "ready",
    {
        "skyrl": FrameworkStep(
            (
                Source(
                    "skyrl/backends/skyrl_train/inference_servers/vllm_server_actor.py",
                    "VLLMServerActor._wait_until_healthy",
                ),
            ),
            sends=(Send("GET", "/health"),),
        ),
        "prime_rl": FrameworkStep(
            (Source(_PRIME, "check_health"), Source(_PRIME, "maybe_check_has_model")),
            sends=(Send("GET", "/health"), Send("GET", "/v1/models")),
        ),
        "trl": FrameworkStep(
            (
                Source(_TRL + "vllm_client.py", "VLLMClient.wait_for_server_ready"),
                Source(_TRL + "vllm_client.py", "VLLMClient.get_max_model_len"),
            ),
            sends=(Send("GET", "/health"), Send("GET", "/v1/models")),
        ),
        "verl": None,
    },
    sdk=(Call("wait_until_ready", kwargs={"deadline": 60}), Call("models")),
)

_PAUSE = Step(
    "pause",
    {
        "skyrl": FrameworkStep(
            (Source(_SKYRL, "RemoteInferenceClient.pause_generation"),),
            sends=(Send("POST", "/pause", {"mode": "keep", "clear_cache": "false"}),),
        ),
        "prime_rl": FrameworkStep(
            (Source(_PRIME, "_pause_engines"),),
            sends=(Send("POST", "/pause", {"mode": "keep", "clear_cache": "false"}),),
        ),
        "trl": FrameworkStep(
            (Source(_TRL + "vllm_client.py", "VLLMClient.pause"),),
            sends=(Send("POST", "/pause", {"mode": "keep"}),),
        ),
        "verl": FrameworkStep(
            (Source(_VERL, "vLLMHttpServer.abort_all_requests"),),
            in_process=(Engine("pause_generation", {"mode": "abort", "clear_cache": True}),),
            note="verl passes wait_for_inflight_requests=False, which vLLM 0.34's AsyncLLM.pause_generation "
            "no longer takes (mode= instead): the abort it means is shown",
        ),
    },
    sdk=(Call("paused", ("keep",), {"clear_cache": False}, block=()),),
)


_INIT_SKYRL = FrameworkStep(
    (
        Source(_SKYRL, "RemoteInferenceClient.get_world_size"),
        Source(_SKYRL, "RemoteInferenceClient.init_weight_update_communicator"),
        Source(
            "skyrl/backends/skyrl_train/weight_sync/broadcast_strategy.py", "BroadcastInitInfo.for_servers"
        ),
    ),
    sends=(
        Send("GET", "/get_world_size", json={}),
        Send("POST", "/init_weight_transfer_engine", json=_init_info(Expr("1 + i * ws"), Expr("1 + total"))),
    ),
)

_INIT_PRIME = FrameworkStep(
    (Source(_PRIME, "init_nccl_broadcast"),),
    sends=(
        Send(
            "POST",
            "/init_broadcaster",
            json={
                "host": Ref("master_address"),
                "port": Ref("master_port"),
                "rank_offset": Expr("i * (total // n)"),
                "inference_world_size": Expr("total"),
                "timeout": 1200,
                "quantize_in_weight_transfer": False,
            },
        ),
    ),
    note="a route of prime-rl's own server (src/prime_rl/inference/vllm/server.py)",
)


def _init_step(name: str, servers: Literal["each", "fleet"]) -> Step:
    trl = FrameworkStep(
        (
            Source(_TRL + "weight_transfer.py", "WeightTransferClient.init_weight_transfer"),
            Source(_TRL + "vllm_client.py", "VLLMClient.init_weight_transfer_engine"),
        ),
        sends=(
            Send("GET", "/get_world_size"),
            Send("POST", "/init_weight_transfer_engine", json=_init_info(1, Expr("ws + 1"))),
        ),
        note="TRL's client takes one server: over two, one client per server" if servers == "fleet" else None,
    )
    return Step(
        name,
        {"skyrl": _INIT_SKYRL, "prime_rl": _INIT_PRIME, "trl": trl, "verl": None},
        sdk=(
            Call("get_world_size"),
            Call("init_weight_transfer_engine", (Ref("nccl_init"),), via="WeightSync"),
        ),
        servers=servers,
        not_exercised="the NCCL rendezvous (the scripted engine answers the init at once): what each server "
        "received is what is checked",
    )


_TRANSFER = Step(
    "weight transfer",
    {
        "skyrl": FrameworkStep(
            (
                Source(
                    "skyrl/backends/skyrl_train/weight_sync/broadcast_strategy.py",
                    "BroadcastWeightTransferSender._send_chunks_vllm_native",
                ),
                Source(_SKYRL, "RemoteInferenceClient.start_weight_update"),
                Source(_SKYRL, "RemoteInferenceClient.update_weights_nccl"),
                Source(_SKYRL, "RemoteInferenceClient.finish_weight_update"),
            ),
            sends=(
                Send(
                    "POST",
                    "/collective_rpc",
                    json={"method": "skyrl_start_weight_update", "kwargs": {"is_checkpoint_format": True}},
                ),
                Send(
                    "POST",
                    "/collective_rpc",
                    json={"method": "update_weights_nccl", "kwargs": {"update_info": Ref("update_info")}},
                ),
                Send("POST", "/collective_rpc", json={"method": "skyrl_finish_weight_update"}),
            ),
            note="worker methods of SkyRL's own worker extension (until vLLM PR 42577)",
        ),
        "prime_rl": FrameworkStep(
            (Source(_PRIME, "update_weights"),),
            sends=(Send("POST", "/update_weights", json={"weight_dir": Ref("weight_dir")}),),
            note="prime-rl's own server reads weight_dir (src/prime_rl/inference/vllm/server.py)",
        ),
        "trl": FrameworkStep(
            (
                Source(_TRL + "weight_transfer.py", "WeightTransferClient.send_weights"),
                Source(_TRL + "vllm_client.py", "VLLMClient.start_weight_update"),
                Source(_TRL + "vllm_client.py", "VLLMClient.update_weights"),
                Source(_TRL + "vllm_client.py", "VLLMClient.finish_weight_update"),
            ),
            sends=(
                Send("POST", "/start_weight_update", json={"is_checkpoint_format": True}),
                Send("POST", "/update_weights", json={"update_info": Ref("update_info")}),
                Send("POST", "/finish_weight_update"),
            ),
        ),
        "verl": None,
    },
    sdk=(
        Call(
            "weight_update",
            kwargs={"pause_mode": "keep", "clear_cache": False},
            handle="update",
            block=(Call("start", (Ref("update_info"),)),),
        ),
    ),
    not_exercised="the NCCL broadcast and the workers' receive (the scripted engine answers update_weights "
    "at once)",
)

_RESUME = Step(
    "resume",
    {
        "skyrl": FrameworkStep(
            (Source(_SKYRL, "RemoteInferenceClient.resume"),), sends=(Send("POST", "/resume"),)
        ),
        "prime_rl": FrameworkStep((Source(_PRIME, "_resume_engines"),), sends=(Send("POST", "/resume"),)),
        "trl": FrameworkStep(
            (Source(_TRL + "vllm_client.py", "VLLMClient.resume"),), sends=(Send("POST", "/resume"),)
        ),
        "verl": FrameworkStep(
            (Source(_VERL, "vLLMHttpServer.resume_generation"),), in_process=(Engine("resume_scheduler"),)
        ),
    },
    sdk=(Call("paused", ("keep",), {"clear_cache": False}, block=()),),
)

_WAKE = Step(
    "sleep, staged wake",
    {
        "skyrl": FrameworkStep(
            (
                Source(
                    "skyrl/backends/skyrl_train/workers/worker_dispatch.py",
                    "WorkerDispatch.save_weights_for_sampler",
                ),
                Source(_SKYRL, "RemoteInferenceClient.sleep"),
                Source(_SKYRL, "RemoteInferenceClient.wake_up"),
            ),
            sends=(
                Send("POST", "/sleep", {"level": "2"}),
                Send("POST", "/wake_up", {"tags": ["weights"]}),
                Send("POST", "/wake_up", {"tags": ["kv_cache"]}),
            ),
        ),
        "prime_rl": None,
        "trl": None,
        "verl": FrameworkStep(
            (
                Source(_VERL, "vLLMHttpServer.release_kv_cache"),
                Source(_VERL, "vLLMHttpServer.resume_kv_cache"),
            ),
            in_process=(
                Engine("sleep", {"level": 2, "mode": "abort", "reset_connector": True}),
                Engine("wake_up", {"tags": ["weights"]}),
                Engine("wake_up", {"tags": ["kv_cache"]}),
                Engine("reset_prefix_cache", {"reset_running_requests": False, "reset_connector": True}),
            ),
        ),
    },
    sdk=(
        Call("sleep", (2,)),
        Call("staged_wake", block=()),
        Call("reset_prefix_cache", kwargs={"reset_external": True}),
    ),
    not_exercised="memory: the scripted engine keeps no weights or KV cache, only which are asleep",
)

_LIVENESS = Step(
    "liveness",
    {
        "skyrl": None,
        "prime_rl": FrameworkStep(
            (
                Source(
                    "src/prime_rl/orchestrator/inference_admin.py",
                    "InferenceAdmin.watch_health",
                    commit="07858eec2de41fc8ca2a5725a9ba1dc6f40b2502",
                ),
            ),
            sends=(Send("GET", "/health"),),
            note="branch feat/orch2: every 10 s, the orchestrator aborted after 6 failures in a row",
        ),
        "trl": None,
        "verl": None,
    },
    sdk=(Call("watchdog", kwargs={"interval": 10, "failures": 6}, handle="watch", block=("first check",)),),
    not_exercised="the cadence and a trip (contract_tests/test_watchdog.py trips the SDK's watchdog)",
)

_LORA = Step(
    "LoRA",
    {
        "skyrl": FrameworkStep(
            (Source(_SKYRL, "RemoteInferenceClient.load_lora_adapter"),),
            sends=(
                Send(
                    "POST",
                    "/skyrl/v1/load_lora_adapter",
                    json={"lora_name": Ref("lora_name"), "lora_path": Ref("adapter")},
                ),
            ),
            note="a route of SkyRL's own server that sets load_inplace (until vLLM PR 41482)",
        ),
        "prime_rl": FrameworkStep(
            (Source(_PRIME, "load_lora_adapter"),),
            sends=(
                Send(
                    "POST",
                    "/load_lora_adapter",
                    json={"lora_name": Ref("lora_name"), "lora_path": Ref("adapter")},
                ),
            ),
            note="a route of prime-rl's own server that sets load_inplace",
        ),
        "trl": None,
        "verl": None,
    },
    sdk=(Call("load_lora_adapter", (Ref("lora_name"), Ref("adapter")), {"load_inplace": True}),),
    not_exercised="the adapter's weights (the scripted engine answers add_lora at once)",
)

STEPS: tuple[Step, ...] = (
    _READY,
    _PAUSE,
    _init_step("NCCL init, one server", "each"),
    _init_step("NCCL init, two servers", "fleet"),
    _TRANSFER,
    _RESUME,
    _WAKE,
    _LIVENESS,
    _LORA,
)
