"""The prompts of the offload check, in token ids: GSM8K questions, boundary probes, fingerprints. No I/O.

Why token ids: whether a reload is compared like with like depends on where each prompt ends against the
KV-cache block and chunk sizes, so the check cuts prompts at exact token counts and sends the ids themselves.

- ``gsm8k``: the profile's GSM8K questions, whole (upstream's workload; most do not end on a boundary).
- ``boundary``: questions cut to end exactly on a multiple of a boundary size (each group's block size, and
  the connector's chunk size where ``blocks_per_chunk > 1``). At a boundary the GPU prefix cache and the
  OffloadingConnector serve different splits, and recurrent state is restored at the block's end.
- ``control``: other prompts cut :data:`CONTROL_OFFSET` tokens short of a boundary.
- ``load``: long prompts for the reset under load (:func:`load_probes`), windows of the questions' tokens,
  each with a first block of its own, so that each one's prefill runs (and stores) over several steps.
- ``fingerprint``: built after a reload from a probe ``P`` whose reload cached ``c`` tokens, one per known
  failure shape, where a state restored at token ``s > c`` is equivalent to the prompt ``P[:s] + P[c:]``
  (the tokens between ``c`` and ``s`` computed twice): ``last_token_doubled`` (``s = c + 1``, vLLM #51094's
  shape) and ``later_block_state`` (``s = c + block``). Served with ``P``'s blocks in the GPU prefix cache,
  the shape prompt computes ``P[c:]`` on top of the state at ``s``, which is what a reload with that bug does.

A boundary probe or control has its own question and its own few-shot examples, so it shares no block
with any other probe and its reload loads every one of its blocks from the CPU tier.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from vllm_devclient.gsm8k import GSM8KItem, GSM8KPrompt, build_prompts

from .probe_files import prompt_key

__all__ = [
    "CONTROL_OFFSET",
    "PROBE_BLOCKS",
    "PROBE_MAX_TOKENS",
    "SHAPES",
    "Probe",
    "ProbeKind",
    "boundary_sizes",
    "build_probes",
    "fingerprint",
    "load_probes",
]

ProbeKind = Literal["gsm8k", "boundary", "control", "fingerprint", "load"]
Shape = Literal["last_token_doubled", "later_block_state"]
SHAPES: tuple[Shape, ...] = ("last_token_doubled", "later_block_state")
CONTROL_OFFSET = 3
# What a boundary probe, a control and a mutation iteration's probe generate: the verdicts on them rest on
# splits, bytes and restored state, and a few tokens show an answer's start.
PROBE_MAX_TOKENS = 32
# A boundary probe spans this many of its blocks where the context has room (never fewer than two): its reload
# then loads several blocks of each attention group from several CPU slots, so a defect in the load plan or in
# the slots acts on blocks a request reads even where one block is longer than a few-shot prompt (real size).
PROBE_BLOCKS = 4
Encode = Callable[[str], list[int]]


@dataclass(frozen=True)
class Probe:
    """One prompt of a run. ``id`` is stable across runs (``q03``, ``b16-q03``, ``c16-q03``,
    ``fp-last_token_doubled-b16-q03``)."""

    id: str
    kind: ProbeKind
    token_ids: tuple[int, ...]
    question: int  # the GSM8K test index it was built from
    label: int | None  # the GSM8K answer (whole questions only)
    max_tokens: int
    boundary: int | None = None  # the size it was cut against (boundary, control)
    base: str | None = None  # fingerprint: the probe whose reload it explains
    shape: Shape | None = None
    state_at: int | None = None  # fingerprint: the token position of the state it stands for

    @property
    def length(self) -> int:
        return len(self.token_ids)

    @property
    def key(self) -> str:
        return prompt_key(self.token_ids)

    def as_prompt(self, index: int) -> GSM8KPrompt:
        return GSM8KPrompt(index, "", self.label, token_ids=self.token_ids, max_tokens=self.max_tokens)


def boundary_sizes(block_sizes: Iterable[int], blocks_per_chunk: int = 1) -> list[int]:
    """Every size a prompt should end on: each group's block size, and the chunk size when larger."""
    sizes = {b for b in block_sizes if b > 0}
    if blocks_per_chunk > 1:
        sizes |= {b * blocks_per_chunk for b in list(sizes)}
    return sorted(sizes)


def build_probes(
    train: Sequence[GSM8KItem],
    test: Sequence[GSM8KItem],
    encode: Encode,
    *,
    num_questions: int,
    num_shots: int,
    max_tokens: int,
    sizes: Sequence[int] = (),
    per_size: int = 4,
    probe_max_tokens: int = PROBE_MAX_TOKENS,
    max_length: int | None = None,
) -> list[Probe]:
    """The GSM8K questions, then for each size ``per_size`` boundary probes and as many controls.

    Each boundary probe and control is a test item no other probe uses, after few-shot examples no other
    probe uses (train items after the first ``num_shots``): no two probes share a block, so each one's blocks
    are stored by its own cold run and all loaded back by its reload, whatever the block size. (With the
    questions' shared few-shot prefix a probe's blocks would already sit in the GPU prefix cache, loaded by an
    earlier probe of the same run, and a reload of less than a chunk is never made.) A probe spans at least
    two of its sizes, so that a whole one lies before its last token and can be loaded (a one-block prompt
    loads nothing: its last token is always computed), and up to :data:`PROBE_BLOCKS` where the context has
    room: where one block is longer than a few-shot prompt (a real hybrid's 544 or 1280 tokens) the probe
    takes more examples, as many as that needs. ``max_length`` (the server's context less the probe's
    tokens) caps a probe; a size it leaves no room for gets fewer probes.
    """
    questions = build_prompts(train, test, num_questions, num_shots)
    probes = [
        Probe(f"q{p.index:02d}", "gsm8k", tuple(encode(p.prompt)), p.index, p.label, max_tokens)
        for p in questions
    ]
    next_question = num_questions
    next_shots = num_shots
    for size in sizes:
        want = (
            PROBE_BLOCKS * size if max_length is None else max(2 * size, min(PROBE_BLOCKS * size, max_length))
        )
        for kind, offset in (("boundary", 0), ("control", CONTROL_OFFSET)):
            made = 0
            while made < per_size and next_question < len(test) and next_shots + num_shots <= len(train):
                index = next_question
                next_question += 1
                shots: list[GSM8KItem] = []
                ids: tuple[int, ...] = ()
                while len(ids) < want and next_shots + num_shots <= len(train):
                    shots += train[next_shots : next_shots + num_shots]
                    next_shots += num_shots
                    (item,) = build_prompts(shots, test[index : index + 1], 1, len(shots))
                    ids = tuple(encode(item.prompt))
                room = len(ids) if max_length is None else min(len(ids), max_length)
                cut = room // size * size - offset
                if cut + offset < 2 * size:
                    continue
                tag = f"{kind[0]}{size}-q{index:02d}"
                probes.append(Probe(tag, kind, ids[:cut], index, None, probe_max_tokens, size))  # type: ignore[arg-type]
                made += 1
    return probes


def fingerprint(
    probe: Probe, cached: int, shape: Shape, block: int, max_length: int | None = None
) -> Probe | None:
    """The prompt standing for ``shape`` on ``probe`` whose reload cached ``cached`` tokens, or None where the
    shape cannot be built (the state would lie past the prompt, nothing was cached, or the prompt would be
    longer than ``max_length``, what the server takes)."""
    if cached <= 0 or cached >= probe.length:
        return None
    ahead = 1 if shape == "last_token_doubled" else block
    state_at = cached + ahead
    if ahead <= 0 or state_at > probe.length:
        return None
    ids = probe.token_ids[:state_at] + probe.token_ids[cached:]
    if max_length is not None and len(ids) > max_length:
        return None
    return Probe(
        f"fp-{shape}-{probe.id}-s{state_at}",
        "fingerprint",
        ids,
        probe.question,
        None,
        probe.max_tokens,
        base=probe.id,
        shape=shape,
        state_at=state_at,
    )


def load_probes(
    probes: Sequence[Probe], count: int, length: int, *, max_tokens: int = PROBE_MAX_TOKENS
) -> list[Probe]:
    """``count`` prompts of ``length`` tokens for the reset under load: windows of the questions' tokens laid
    end to end (repeated where they are fewer), each starting where no other window nor probe starts, so none
    is served from another's blocks and every one is computed, and stored, from its first token."""
    pool = tuple(t for p in probes if p.kind == "gsm8k" for t in p.token_ids)
    if not pool or count <= 0 or length <= 0:
        return []
    while len(pool) < length + count * _LOAD_STRIDE + 1:
        pool += pool
    taken = {p.token_ids[:_LOAD_KEY] for p in probes}
    out: list[Probe] = []
    start = 1
    while len(out) < count and start + length <= len(pool):
        ids = pool[start : start + length]
        start += _LOAD_STRIDE
        if ids[:_LOAD_KEY] in taken:
            continue
        taken.add(ids[:_LOAD_KEY])
        out.append(Probe(f"load{len(out):03d}", "load", ids, -1, None, max_tokens))
    return out


_LOAD_STRIDE = 7  # tokens between two windows' starts
_LOAD_KEY = 64  # the leading tokens that must differ (more than a block of every tiny profile)
