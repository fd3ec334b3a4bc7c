"""The LoRA routes: load and unload an adapter."""

from __future__ import annotations

from .. import arguments as check
from ..answers import text_message
from ..models import MessageResult
from ..records import Cli, Param, Route

__all__ = ["ROUTES"]

ROUTES: tuple[Route, ...] = (
    Route(
        name="load_lora_adapter",
        method="POST",
        path="/v1/load_lora_adapter",
        reader=text_message,
        dev_route=False,
        long_running=True,
        doc="POST /v1/load_lora_adapter (needs VLLM_ALLOW_RUNTIME_LORA_UPDATING=1 and --enable-lora).",
        answer=MessageResult,
        params=(
            Param(
                name="lora_name",
                send="body",
                check=check.text,
                type=str,
                positional=True,
                help="The name requests will use.",
            ),
            Param(
                name="lora_path",
                send="body",
                check=check.text,
                type=str,
                positional=True,
                help="Where the adapter is, on the server.",
            ),
            Param(
                name="load_inplace",
                send="body",
                check=check.flag,
                type=bool,
                default=False,
                help="Replace an adapter of the same name in place.",
            ),
            Param(
                name="is_3d_lora_weight",
                send="body",
                check=check.flag,
                type=bool,
                default=False,
                help="The adapter's weights are 3-D (MoE experts).",
            ),
        ),
        cli=Cli(topic="lora"),
    ),
    Route(
        name="unload_lora_adapter",
        method="POST",
        path="/v1/unload_lora_adapter",
        reader=text_message,
        dev_route=False,
        doc="POST /v1/unload_lora_adapter.",
        answer=MessageResult,
        params=(
            Param(
                name="lora_name",
                send="body",
                check=check.text,
                type=str,
                positional=True,
                help="The adapter's name.",
            ),
            Param(
                name="lora_int_id",
                send="body",
                check=check.non_negative_int,
                type=int | None,
                default=None,
                help="Its numeric id, when the name is ambiguous.",
            ),
        ),
        cli=Cli(topic="lora"),
    ),
)
