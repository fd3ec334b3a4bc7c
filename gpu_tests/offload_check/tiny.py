"""Tiny seeded models of every architecture family in vLLM's offload matrix, built where they run.

Checkpoints of the real models cannot reach an offline GPU machine; their architectures can. A family is a
``transformers.AutoConfig.for_model(model_type, ...)`` config small enough to start in seconds, with the
SmolLM2 tokenizer (vocabulary 49152) beside it and weights drawn from N(0, 0.02) with a fixed seed, written
as safetensors. Every matrix is drawn from its own generator seeded by ``seed`` and the parameter's name,
so the files are the same on every build (the manifest records their sha256); one-dimensional parameters
(norm scales, biases, SSM decay terms) keep the architecture's own deterministic initialisation.

:func:`build_tiny_model` needs torch, transformers and safetensors (the GPU machine has them); nothing here
is imported before it is called.
"""

from __future__ import annotations

import json
import shutil
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vllm_devclient.gsm8k import file_sha256

__all__ = [
    "COMMON_CONFIG",
    "TINY_FAMILIES",
    "TOKENIZER_FILES",
    "TinyFamily",
    "build_tiny_model",
    "tiny_config_kwargs",
]

# The SmolLM2 tokenizer's ids: <|im_start|> = 1, <|im_end|> = 2 (what the Instruct model ends turns with).
COMMON_CONFIG: Mapping[str, Any] = {
    "vocab_size": 49152,
    "hidden_size": 256,
    "intermediate_size": 512,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 64,
    "max_position_embeddings": 4096,
    "bos_token_id": 1,
    "eos_token_id": 2,
    "pad_token_id": 2,
    "initializer_range": 0.02,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
}
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")


@dataclass(frozen=True)
class TinyFamily:
    """One architecture family: the config that makes it, and what it stands for in vLLM's matrix."""

    name: str
    model_type: str
    architectures: tuple[str, ...]
    description: str
    config: Mapping[str, Any] = field(default_factory=dict)
    stands_for: str = ""
    hybrid: bool = False
    default: bool = True
    server_args: tuple[str, ...] = ()


TINY_FAMILIES: dict[str, TinyFamily] = {
    f.name: f
    for f in (
        TinyFamily(
            "llama",
            "llama",
            ("LlamaForCausalLM",),
            "dense Llama, one KV-cache group (the SmolLM2 architecture)",
            {"num_hidden_layers": 4, "tie_word_embeddings": True},
            stands_for="HuggingFaceTB/SmolLM2-135M-Instruct",
            server_args=("--attention-backend", "FLASH_ATTN"),
        ),
        TinyFamily(
            "gemma3",
            "gemma3_text",
            ("Gemma3ForCausalLM",),
            "sliding window: 5 sliding-window layers and 1 full-attention layer, two cache groups",
            {"num_hidden_layers": 6, "sliding_window": 128, "query_pre_attn_scalar": 64},
            stands_for="google/gemma-3-1b-it (vLLM PR #47754)",
            hybrid=True,
            server_args=("--attention-backend", "FLASH_ATTN"),
        ),
        TinyFamily(
            "gemma4",
            "gemma4_text",
            ("Gemma4ForCausalLM",),
            "heterogeneous head dims (64 sliding, 128 global) and sliding window",
            {
                "num_hidden_layers": 6,
                "sliding_window": 128,
                "global_head_dim": 128,
                "layer_types": [
                    "sliding_attention",
                    "sliding_attention",
                    "full_attention",
                    "sliding_attention",
                    "sliding_attention",
                    "full_attention",
                ],
                "hidden_size_per_layer_input": 0,
                "vocab_size_per_layer_input": 49152,
                "num_kv_shared_layers": 0,
            },
            stands_for="google/gemma-4-E4B-it",
            hybrid=True,
            # FLASH_ATTN sends the 128-dim global layers to FA's CuTe path, which needs nvidia-cutlass-dsl.
            server_args=("--attention-backend", "TRITON_ATTN"),
        ),
        TinyFamily(
            "nemotron-h",
            "nemotron_h",
            ("NemotronHForCausalLM",),
            "hybrid Mamba-2: Mamba, attention, Mamba, MLP layers",
            {
                "num_hidden_layers": 4,
                "hybrid_override_pattern": "M*M-",
                "mamba_num_heads": 8,
                "mamba_head_dim": 32,
                "n_groups": 1,
                "ssm_state_size": 64,
            },
            stands_for="nvidia/Nemotron-H-8B-Base-8K",
            hybrid=True,
            server_args=("--attention-backend", "FLASH_ATTN"),
        ),
        TinyFamily(
            "falcon-h1",
            "falcon_h1",
            ("FalconH1ForCausalLM",),
            "parallel hybrid: attention and Mamba-2 in every layer",
            {
                "num_hidden_layers": 4,
                "mamba_d_ssm": 512,
                "mamba_n_heads": 8,
                "mamba_d_head": 64,
                "mamba_n_groups": 1,
                "mamba_d_state": 64,
                "mamba_d_conv": 4,
                "mamba_expand": 2,
                "mamba_chunk_size": 128,
            },
            stands_for="tiiuae/Falcon-H1-0.5B-Instruct (vLLM PR #47754)",
            hybrid=True,
            server_args=("--attention-backend", "FLASH_ATTN"),
        ),
        TinyFamily(
            "mamba",
            "mamba",
            ("MambaForCausalLM",),
            "plain Mamba-1, no attention at all",
            {"num_hidden_layers": 4, "state_size": 16, "expand": 2, "conv_kernel": 4},
            stands_for="state-spaces/mamba-130m-hf (vLLM PR #47754)",
            hybrid=True,
            default=False,
        ),
        TinyFamily(
            "qwen3-next",
            "qwen3_next",
            ("Qwen3NextForCausalLM",),
            "hybrid Gated DeltaNet + full attention, MoE MLPs (8 experts, top 2, a shared expert)",
            {
                "num_hidden_layers": 4,
                "layer_types": ["linear_attention", "linear_attention", "linear_attention", "full_attention"],
                "full_attention_interval": 4,
                "num_experts": 8,
                "num_experts_per_tok": 2,
                "moe_intermediate_size": 128,
                "shared_expert_intermediate_size": 128,
                "decoder_sparse_step": 1,
                "norm_topk_prob": True,
                "linear_num_key_heads": 2,
                "linear_num_value_heads": 4,
                "linear_key_head_dim": 64,
                "linear_value_head_dim": 64,
                "linear_conv_kernel_dim": 4,
            },
            stands_for="Qwen/Qwen3.5-35B-A3B",
            hybrid=True,
            # vLLM 0.26 picks FlashInfer's GDN prefill kernel on Hopper; the payload carries no flashinfer.
            server_args=(
                "--attention-backend",
                "FLASH_ATTN",
                "--additional-config",
                '{"gdn_prefill_backend": "triton"}',
            ),
        ),
        TinyFamily(
            "deepseek-v2",
            "deepseek_v2",
            ("DeepseekV2ForCausalLM",),
            "multi-head latent attention (kv_lora_rank 512, rope 64) and MoE (8 experts, top 2, 1 shared)",
            {
                "num_hidden_layers": 3,
                "num_key_value_heads": 4,
                "kv_lora_rank": 512,
                "q_lora_rank": None,
                "qk_nope_head_dim": 128,
                "qk_rope_head_dim": 64,
                "v_head_dim": 128,
                "n_routed_experts": 8,
                "num_experts_per_tok": 2,
                "n_shared_experts": 1,
                "moe_intermediate_size": 128,
                "first_k_dense_replace": 1,
                "topk_method": "greedy",
                "n_group": 1,
                "topk_group": 1,
            },
            stands_for="deepseek-ai/DeepSeek-V2-Lite",
        ),
        TinyFamily(
            "deepseek-v4",
            "deepseek_v4",
            ("DeepseekV4ForCausalLM",),
            "compressed sparse attention + MoE (needs fp8 KV and block size 256, as upstream's large step)",
            {
                "num_hidden_layers": 2,
                "num_key_value_heads": 1,
                "head_dim": 512,
                "q_lora_rank": 128,
                "o_lora_rank": 128,
                "o_groups": 2,
                "n_routed_experts": 8,
                "num_experts_per_tok": 2,
                "n_shared_experts": 1,
                "moe_intermediate_size": 128,
                "index_n_heads": 4,
                "index_head_dim": 128,
                "layer_types": ["compressed_sparse_attention", "heavily_compressed_attention"],
                "mlp_layer_types": ["moe", "moe"],
            },
            stands_for="deepseek-ai/DeepSeek-V4-Flash",
            default=False,
            server_args=("--kv-cache-dtype", "fp8", "--block-size", "256"),
        ),
    )
}


def tiny_config_kwargs(family: TinyFamily, overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The keyword arguments given to ``AutoConfig.for_model(family.model_type, **kwargs)``."""
    return {
        **COMMON_CONFIG,
        **family.config,
        "architectures": list(family.architectures),
        **(overrides or {}),
    }


def _keep_family_keys(path: Path, family: TinyFamily) -> None:
    """Write back family keys a transformers release folded into others (Gemma 4's ``global_head_dim`` went
    into ``per_layer_config`` in newer releases; vLLM reads the flat key)."""
    data = json.loads(path.read_text())
    missing = {k: v for k, v in family.config.items() if k not in data}
    if missing:
        data.update(missing)
        path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")


def _seed_for(seed: int, name: str) -> int:
    return (seed * 1_000_003 + zlib.crc32(name.encode())) % (2**63)


def _write_tokenizer(tokenizer_dir: str | Path, out: Path) -> None:
    """:data:`TOKENIZER_FILES` from a folder, or a Hub id's tokenizer (a machine with internet)."""
    if Path(tokenizer_dir).is_dir():
        for name in TOKENIZER_FILES:
            src = Path(tokenizer_dir) / name
            if src.exists():
                shutil.copy(src, out / name)
        return
    from transformers import AutoTokenizer

    AutoTokenizer.from_pretrained(str(tokenizer_dir)).save_pretrained(out)


def _write_weights(config: Any, out: Path, *, seed: int, std: float) -> dict[str, Any]:
    """Seeded weights (each matrix from its own generator, :func:`_seed_for`) as bf16 safetensors; the
    manifest's weights, parameter count and files with their sha256."""
    import torch
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    params = 0
    with torch.no_grad():
        for name, param in sorted(model.named_parameters()):
            params += param.numel()
            if param.ndim >= 2:
                gen = torch.Generator().manual_seed(_seed_for(seed, name))
                param.copy_(torch.randn(param.shape, generator=gen) * std)
    model = model.to(torch.bfloat16)
    model.save_pretrained(out, safe_serialization=True)
    files = sorted(p.name for p in out.glob("*.safetensors"))
    return {
        "weights": "safetensors",
        "parameters": params,
        "files": {name: file_sha256(out / name) for name in files},
    }


def build_tiny_model(
    family: TinyFamily | str,
    out_dir: str | Path,
    *,
    tokenizer_dir: str | Path | None,
    seed: int = 0,
    std: float = 0.02,
    weights: bool = True,
    overrides: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Write ``config.json``, the tokenizer files, ``generation_config.json`` and (``weights``) seeded
    ``model.safetensors`` into ``out_dir``; returns the manifest (also written as ``tiny_manifest.json``).

    ``tokenizer_dir`` holds :data:`TOKENIZER_FILES` (the converted SmolLM2 model), or is a Hub id; with
    None no tokenizer is written
    (for tests). ``overrides`` change config values (tests shrink the vocabulary with it).
    """
    import torch
    import transformers
    from transformers import AutoConfig, GenerationConfig

    fam = TINY_FAMILIES[family] if isinstance(family, str) else family
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    kwargs = tiny_config_kwargs(fam, overrides)
    config = AutoConfig.for_model(fam.model_type, **kwargs)
    config.save_pretrained(out)
    if tokenizer_dir is not None:
        _write_tokenizer(tokenizer_dir, out)
    manifest: dict[str, Any] = {
        "family": fam.name,
        "model_type": fam.model_type,
        "architectures": list(fam.architectures),
        "seed": seed,
        "std": std,
        "transformers": transformers.__version__,
        "torch": torch.__version__,
        "weights": None,
    }
    if weights:
        manifest.update(_write_weights(config, out, seed=seed, std=std))
    GenerationConfig(
        bos_token_id=kwargs["bos_token_id"],
        eos_token_id=kwargs["eos_token_id"],
        pad_token_id=kwargs["pad_token_id"],
    ).save_pretrained(out)
    _keep_family_keys(out / "config.json", fam)
    (out / "tiny_manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return manifest
