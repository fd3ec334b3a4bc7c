"""What a case is checked with: the settings both the sequence (``check.py``: iterations, batch control) and
the judgement (``judge.py``: thresholds, expectations) read."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from .server import Frontend

__all__ = ["CheckSettings"]


@dataclass(frozen=True)
class CheckSettings:
    """What the judgement (and the sequence) needs to know about the case."""

    accuracy_threshold: float | None = None
    tolerance: float = 0.05
    expect_cpu_store_events: bool = False
    expected_frontend: Frontend | None = None
    max_failed_rate: float = 0.05
    iterations: int = 3
    # the server holds the reference instrument (first-use records); without it kv_bytes_identical is not
    # evaluated and the case cannot pass, only be "not proven"
    reference_digests: bool = False
    # > 0: clean iterations send a second warm run spread over this many seconds (check.py), the batch control
    batch_control_s: float = 0.0
    # > 0: clean iterations also time this many questions decoding at once from the GPU prefix cache (the
    # ``decode`` run: the real-size budget's decode rate; never judged)
    decode_in_flight: int = 0
    # > 0: the reset under load (check.py; on in the history scenarios): each clean iteration ends by sending
    # this many long prompts (``load_length`` tokens) at once, firing full resets while they run, and
    # resetting again once they finished
    reset_under_load: int = 0
    load_length: int = 2048
    # the longest prompt the server takes (its context less a probe's tokens; None: not known): a fingerprint
    # longer than this is not built (a four-block probe's later-block shape adds a block)
    max_prompt: int | None = None
    # mutation name -> the assertions that must catch it (gpu_tests/kv_proof/catalogue.py)
    mutation_expectations: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
