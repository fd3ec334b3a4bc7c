"""A vLLM general plugin: ``--load-format dummy`` draws seeded N(0, 0.02) weights instead of U(-1e-3, 1e-3).

The fallback for a tiny family whose safetensors vLLM cannot load (a transformers release names or shapes a
weight differently from what the vLLM release expects): the model is built by vLLM itself, so every shape
fits. vLLM's own dummy values are so small that every prompt gets the same degenerate answer, which an exact
match cannot tell from a correct one; these give varied greedy output. Matrices: N(0, 0.02) from a generator
seeded by the parameter's name. Vectors: norm scales keep their constructed values, SSM terms get stable
values (A = -1..-n, D = 1, dt_bias = log(expm1(0.01))), everything else 0.

With ``VLLM_DEVCLIENT_DUMMY_ON_DEVICE=1`` (the real-size profiles) the matrices are drawn in place on the
parameter's device from a generator seeded the same way: billions of weights in seconds, with no host copy
and no second buffer (Gemma 4's per-layer embedding table alone has 2.8 billion).

Registered through an entry point (``vllm.general_plugins``) that ``device_setup.sh`` writes next to the
unpacked vLLM, so every engine and worker process loads it; it only replaces the dummy initialiser.
"""

from __future__ import annotations

import math
import os
import zlib
from typing import Any

SEED = 0
STD = 0.02
ON_DEVICE_ENV = "VLLM_DEVCLIENT_DUMMY_ON_DEVICE"


def _fill(name: str, param: Any, on_device: bool = False) -> None:
    import torch

    if param.device.type == "meta" or not torch.is_floating_point(param):
        return
    if param.ndim >= 2:
        seed = (SEED * 1_000_003 + zlib.crc32(name.encode())) % 2**63
        if on_device:
            param.normal_(0.0, STD, generator=torch.Generator(device=param.device).manual_seed(seed))
            return
        gen = torch.Generator(device="cpu").manual_seed(seed)
        param.copy_((torch.randn(param.shape, generator=gen) * STD).to(param.dtype))
        return
    leaf = name.rsplit(".", 1)[-1]
    if "norm" in name or leaf in ("layer_scalar", "scale"):
        return  # constructed as ones (or zeros for (1 + w) norms)
    if leaf in ("A", "A_log"):
        values = torch.arange(1, param.numel() + 1, dtype=torch.float32)
        param.copy_((-values if leaf == "A" else values.log()).reshape(param.shape).to(param.dtype))
    elif leaf == "D":
        param.fill_(1.0)
    elif leaf == "dt_bias":
        param.fill_(math.log(math.expm1(0.01)))
    else:
        param.zero_()


def initialize_dummy_weights(model: Any, model_config: Any = None, *args: Any, **kwargs: Any) -> None:
    import torch

    on_device = os.environ.get(ON_DEVICE_ENV, "0") == "1"
    with torch.no_grad():
        for name, param in model.named_parameters():
            _fill(name, param, on_device)


def _load_weights(self: Any, model: Any, model_config: Any) -> None:
    # Once over the whole model, so every parameter is seeded by its full name.
    initialize_dummy_weights(model)


def _keep_gemma4_global_head_dim() -> None:
    """vLLM 0.26 reads Gemma 4's ``global_head_dim`` and ``head_dim`` as flat attributes; transformers 5.17
    folds the first into ``per_layer_config`` and refuses global reads of the second. Keep both readable."""
    try:
        from transformers.models.gemma4 import configuration_gemma4 as module
    except ImportError:
        return
    cls = module.Gemma4TextConfig
    original = cls.__post_init__
    if getattr(original, "_vllm_devclient", False):
        return

    def post_init(self: Any, *args: Any, **kwargs: Any) -> None:
        global_head_dim = kwargs.get("global_head_dim")
        original(self, *args, **kwargs)
        self.allow_global_per_layer_attribute_access = True
        if global_head_dim is not None:
            self.global_head_dim = global_head_dim

    post_init._vllm_devclient = True  # type: ignore[attr-defined]
    cls.__post_init__ = post_init


def register() -> None:
    """Entry point: replace the dummy loader's weight initialisation (idempotent)."""
    try:
        _keep_gemma4_global_head_dim()
    except Exception as exc:  # never take the server down for the tiny models' sake
        print(f"vllm-devclient tiny_init: gemma4 config patch skipped: {exc}")
    from vllm.model_executor.model_loader import dummy_loader

    if getattr(dummy_loader, "_vllm_devclient_tiny_init", False):
        return
    dummy_loader.DummyModelLoader.load_weights = _load_weights
    dummy_loader._vllm_devclient_tiny_init = True
