"""A tiny, weightless model directory that both vLLM frontends accept.

The frontends read only the config and the tokenizer (the scripted engine does the "model"
part), so a 1-layer Llama config plus a small byte-level BPE tokenizer trained on the fly is
enough. Nothing is downloaded.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Final

__all__ = ["TINY_MODEL_FILES", "make_model_dir"]

TINY_MODEL_FILES: Final = ("config.json", "tokenizer.json", "tokenizer_config.json")
_MARKER: Final = ".vllm-devclient-model"
_FORMAT: Final = "1"  # bump when the generated files change
_VOCAB_SIZE: Final = 512

_TEXT: Final = """\
The quick brown fox jumps over the lazy dog. A prefix cache keeps the keys and values of
tokens that were already computed, so a new request that starts with the same text can skip
that work. Resetting the cache drops every block that no running request holds.
Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May.
How many clips did Natalia sell altogether in April and May? She sold 48 / 2 = 24 clips in May.
Altogether she sold 48 + 24 = 72 clips. The answer is 72.
Weng earns $12 an hour for babysitting. Yesterday, she just did 50 minutes of babysitting.
How much did she earn? 12 / 60 = 0.2 per minute; 0.2 x 50 = 10. The answer is 10.
Sleep mode offloads the weights, wakes up on request, and pauses the scheduler meanwhile.
0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 hello world, user, assistant, system.
"""

_CHAT_TEMPLATE: Final = (
    "{% for message in messages %}"
    "{{ '<|' + message['role'] + '|>\\n' + message['content'] + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% endif %}"
)


def _config(vocab_size: int) -> dict[str, Any]:
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 1,
        "num_attention_heads": 4,
        "num_key_value_heads": 4,
        "head_dim": 16,
        "hidden_act": "silu",
        "max_position_embeddings": 2048,
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
        "tie_word_embeddings": False,
        "vocab_size": vocab_size,
        "bos_token_id": 0,
        "eos_token_id": 1,
        "torch_dtype": "bfloat16",
    }


def _tokenizer_config() -> dict[str, Any]:
    return {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": "<s>",
        "eos_token": "</s>",
        "unk_token": "<unk>",
        "model_max_length": 2048,
        "add_bos_token": False,
        "clean_up_tokenization_spaces": False,
        "chat_template": _CHAT_TEMPLATE,
    }


@functools.lru_cache(maxsize=1)
def _files() -> dict[str, str]:
    """The three files' text; trained once per process."""
    try:
        from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            "make_model_dir needs the 'tokenizers' package: pip install 'vllm-devclient[testing]'"
        ) from exc
    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=_VOCAB_SIZE,
        special_tokens=["<s>", "</s>", "<unk>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(_TEXT.splitlines(), trainer)
    return {
        "config.json": json.dumps(_config(_VOCAB_SIZE), indent=2, sort_keys=True),
        "tokenizer.json": tokenizer.to_str(),
        "tokenizer_config.json": json.dumps(_tokenizer_config(), indent=2, sort_keys=True),
    }


def _digest() -> str:
    # Keyed on the inputs, not the trained output, so no training is needed to find the cache.
    spec = json.dumps(
        [_FORMAT, _VOCAB_SIZE, _TEXT, _CHAT_TEMPLATE, _config(_VOCAB_SIZE), _tokenizer_config()]
    )
    return hashlib.sha256(spec.encode()).hexdigest()[:16]


def _default_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "vllm-devclient"


def _is_built(path: Path, digest: str) -> bool:
    marker = path / _MARKER
    return (
        marker.is_file()
        and marker.read_text() == digest
        and all((path / name).is_file() for name in TINY_MODEL_FILES)
    )


def make_model_dir(path: str | os.PathLike[str] | None = None) -> Path:
    """Write the tiny model directory to ``path`` and return it (absolute).

    Without ``path`` the directory lives in the user cache (``~/.cache/vllm-devclient``) under
    a name derived from its content. Either way an existing, identical directory is reused, so
    calling this many times is cheap.
    """
    digest = _digest()
    target = (Path(path) if path is not None else _default_root() / f"tiny-llama-{digest}").absolute()
    if _is_built(target, digest):
        return target
    if target.exists() and not target.is_dir():
        raise NotADirectoryError(f"{target} exists and is not a directory; pick another path")
    target.parent.mkdir(parents=True, exist_ok=True)
    # Build next to the target and move the files in, so readers never see half a directory.
    tmp = Path(tempfile.mkdtemp(prefix=".tiny-model-", dir=target.parent))
    try:
        for name, text in _files().items():
            (tmp / name).write_text(text)
        (tmp / _MARKER).write_text(digest)
        target.mkdir(exist_ok=True)
        for name in (*TINY_MODEL_FILES, _MARKER):
            os.replace(tmp / name, target / name)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target
