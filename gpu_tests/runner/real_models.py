"""Upstream's real models at real size, offline: the committed configs, what is changed to serve them with
dummy weights, and the folders vLLM is pointed at.

Each upstream profile's ``config.json`` lies in ``gpu_tests/real_configs/<profile>/`` as published (sources
in that folder's README). No checkpoint and no tokenizer of these models reaches the offline GPU machine, so
:func:`build_real_model` writes a served folder from the committed config with the changes of
:data:`OFFLINE_CHANGES`, all of them about the vocabulary: the SmolLM2 tokenizer the payload already carries
stands in (49152 tokens), so the output vocabulary and the special ids are set to it and nothing else moves
(layers, heads, KV layout, experts, the Gemma 4 per-layer embedding table all keep their real sizes). The
server flags that go with them are the profiles' (``profiles.REAL_SIZE_ARGS``).

    python -m gpu_tests.runner.real_models --out /tmp/real --tokenizer /tmp/models/smollm2
"""

from __future__ import annotations

import argparse
import copy
import json
import shutil
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpu_tests.offload_check.tiny import COMMON_CONFIG, TOKENIZER_FILES

REAL_CONFIGS = Path(__file__).resolve().parents[1] / "real_configs"
STAND_IN_VOCAB = int(COMMON_CONFIG["vocab_size"])  # the SmolLM2 tokenizer
STAND_IN_IDS: Mapping[str, int] = {
    "bos_token_id": int(COMMON_CONFIG["bos_token_id"]),
    "eos_token_id": int(COMMON_CONFIG["eos_token_id"]),
    "pad_token_id": int(COMMON_CONFIG["pad_token_id"]),
}


@dataclass(frozen=True)
class Change:
    """One change to a published config: ``key`` (dotted for a nested config) set to ``value``, or removed."""

    key: str
    value: Any
    why: str
    remove: bool = False

    def describe(self) -> str:
        return f"{self.key} removed" if self.remove else f"{self.key} = {json.dumps(self.value)}"


def _vocab(prefix: str) -> tuple[Change, ...]:
    return (
        Change(
            f"{prefix}vocab_size",
            STAND_IN_VOCAB,
            "the SmolLM2 tokenizer stands in: every sampled id must decode",
        ),
    )


def _ids(prefix: str, present: Sequence[str]) -> tuple[Change, ...]:
    return tuple(
        Change(f"{prefix}{k}", STAND_IN_IDS[k], "the stand-in tokenizer's id (<|im_start|>, <|im_end|>)")
        for k in present
    )


# Per profile, every change from the published config, in order.
OFFLINE_CHANGES: dict[str, tuple[Change, ...]] = {
    "nemotron-h-8b": (*_vocab(""), *_ids("", ("bos_token_id", "eos_token_id", "pad_token_id"))),
    "gemma-4-e4b-it": (
        *_vocab("text_config."),
        *_ids("", ("eos_token_id",)),
    ),
    "qwen3.5-35b": (*_vocab("text_config."), *_ids("text_config.", ("eos_token_id",))),
    "deepseek-v2-lite-tiering-tp2": (
        *_vocab(""),
        *_ids("", ("bos_token_id", "eos_token_id")),
        Change(
            "auto_map",
            None,
            "the remote code is not carried; transformers and vLLM 0.26 know deepseek_v2 themselves",
            remove=True,
        ),
    ),
}


def published_config(profile: str) -> dict[str, Any]:
    path = REAL_CONFIGS / profile / "config.json"
    if not path.exists():
        raise SystemExit(f"no committed config for {profile!r}: known are {sorted(OFFLINE_CHANGES)}")
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def offline_config(profile: str, published: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The published config with :data:`OFFLINE_CHANGES` applied (a change whose key is missing fails)."""
    data = copy.deepcopy(dict(published if published is not None else published_config(profile)))
    for change in OFFLINE_CHANGES[profile]:
        *parents, leaf = change.key.split(".")
        node = data
        for part in parents:
            node = node[part]
        if leaf not in node:
            raise KeyError(f"{profile}: {change.key} is not in the published config")
        if change.remove:
            del node[leaf]
        else:
            node[leaf] = change.value
    return data


def build_real_model(profile: str, out_dir: Path, tokenizer_dir: Path | None) -> dict[str, Any]:
    """Write ``config.json`` (offline), ``generation_config.json``, the stand-in tokenizer files and
    ``real_manifest.json`` (the changes, listed) into ``out_dir``; returns the manifest."""
    out_dir.mkdir(parents=True, exist_ok=True)
    config = offline_config(profile)
    (out_dir / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    (out_dir / "generation_config.json").write_text(json.dumps(dict(STAND_IN_IDS), indent=2) + "\n")
    copied = []
    if tokenizer_dir is not None:
        for name in TOKENIZER_FILES:
            src = tokenizer_dir / name
            if src.exists():
                shutil.copy(src, out_dir / name)
                copied.append(name)
        if "tokenizer.json" not in copied:
            raise SystemExit(f"{tokenizer_dir} holds no tokenizer.json")
    manifest = {
        "profile": profile,
        "published": str((REAL_CONFIGS / profile / "config.json").relative_to(REAL_CONFIGS.parents[1])),
        "changes": [{"change": c.describe(), "why": c.why} for c in OFFLINE_CHANGES[profile]],
        "tokenizer": copied,
    }
    (out_dir / "real_manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    return manifest


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m gpu_tests.runner.real_models", description=__doc__.split("\n")[0]
    )
    p.add_argument("--out", required=True, help="one folder per profile is written here")
    p.add_argument("--tokenizer", required=True, help="folder with the SmolLM2 tokenizer files")
    p.add_argument("--profiles", default="all", help="comma list or 'all'")
    args = p.parse_args(argv)
    names = list(OFFLINE_CHANGES) if args.profiles == "all" else args.profiles.split(",")
    for name in names:
        manifest = build_real_model(name.strip(), Path(args.out) / name.strip(), Path(args.tokenizer))
        print(f"{name}: {', '.join(c['change'] for c in manifest['changes'])}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
