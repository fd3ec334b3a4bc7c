"""Real size by volume (issue 53): GSM8K questions built long enough that each reload loads several blocks of
its own from the CPU tier. No I/O.

A real hybrid's KV block holds 544 or 1,280 tokens, longer than a few-shot GSM8K prompt, so most questions
of the profile's prompts hold no whole block past the shared few-shot prefix, and that prefix, loaded once,
serves the other requests from the GPU prefix cache. :func:`volume_questions` gives each question few-shot
examples of its own, as many as reach ``blocks`` whole blocks before the question ends: its first example is
one no other question starts with, so no two prompts share a block (a block is named by its whole prefix) and
the reload loads every whole block of every prompt from the CPU tier. The examples are read from the end of
the train split backwards, away from the boundary probes' (``probes.build_probes`` reads them from the
start). :func:`plan_volume` says how many questions, and what CPU tier, a model needs for a target of
connector-loaded blocks per clean pass.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from vllm_devclient.gsm8k import GSM8KItem, build_prompts

from .probes import Encode, Probe

__all__ = ["MIN_LOADED_BLOCKS", "VolumePlan", "plan_volume", "volume_questions"]

MIN_LOADED_BLOCKS = 1000  # connector-loaded first-use blocks a clean pass must check (issue 53)
MIN_LOADED_SHARE = 0.5  # of the reload's requests, the share that must load from the CPU tier


def volume_questions(
    train: Sequence[GSM8KItem],
    test: Sequence[GSM8KItem],
    encode: Encode,
    *,
    num_questions: int,
    block_size: int,
    blocks: int,
    max_tokens: int,
    max_length: int | None = None,
) -> list[Probe]:
    """The first ``num_questions`` test questions, whole (their labels kept), each after examples of its own
    until its prompt holds ``blocks`` whole blocks of ``block_size`` tokens, or as many as ``max_length``
    leaves room for (never fewer than one). Question i's examples: ``train[-1 - i]`` and those before it,
    round to the end again when they run out (a small sample); no two questions start with the same one."""
    want = blocks * block_size
    if max_length is not None:  # one token past the blocks must fit: the last token is always computed
        want = min(want, max(block_size, (max_length - 1) // block_size * block_size))
    out = []
    for i, item in enumerate(test[:num_questions]):
        (prompt,) = build_prompts([], [item], 1, 0)
        ids = tuple(encode(prompt.prompt))
        shots: list[GSM8KItem] = []
        order = [train[(len(train) - 1 - i - k) % len(train)] for k in range(len(train))] if train else []
        for example in order:
            if len(ids) >= want + 1:  # the last token is always computed: one past the blocks
                break
            trial = [*shots, example]
            (longer,) = build_prompts(trial, [item], 1, len(trial))
            candidate = tuple(encode(longer.prompt))
            if max_length is not None and len(candidate) > max_length:
                break
            shots, ids, prompt = trial, candidate, longer
        out.append(Probe(f"q{i:02d}", "gsm8k", ids, i, prompt.label, max_tokens))
    return out


@dataclass(frozen=True)
class VolumePlan:
    """What a model needs for ``target`` connector-loaded blocks per clean pass."""

    model: str
    block_size: int
    blocks_per_prompt: int  # whole blocks of each question's prompt (its context's room, at most ``blocks``)
    questions: int
    cpu_block_bytes: int  # what one block takes in the CPU tier (every group's share)
    cpu_gib: float  # a tier that holds every prompt's blocks twice over (two cold runs store them)

    @property
    def loaded_blocks(self) -> int:
        return self.blocks_per_prompt * self.questions


def plan_volume(
    model: str,
    *,
    block_size: int,
    context: int,
    answer_room: int,
    cpu_block_bytes: int,
    min_questions: int,
    target: int = MIN_LOADED_BLOCKS,
    blocks: int = 8,
    margin: float = 1.25,
) -> VolumePlan:
    """Blocks per prompt: as many as the context leaves room for past the answer (``answer_room``: the
    question's tokens and its generation), at most ``blocks``; questions: enough for ``target`` with
    ``margin`` (never fewer than ``min_questions``); the CPU tier: every block twice, rounded up to a GiB."""
    per_prompt = max(1, min(blocks, (context - answer_room) // block_size))
    questions = max(min_questions, math.ceil(target * margin / per_prompt))
    stored = 2 * per_prompt * questions * cpu_block_bytes
    return VolumePlan(
        model,
        block_size,
        per_prompt,
        questions,
        cpu_block_bytes,
        float(math.ceil(stored / 2**30)),
    )
