"""The reference book: what the model computed for each prefix, and whether a block a request starts from
holds one of those computations. No torch and no vLLM: the worker-side instrument (``reference.py``) feeds
it digests.

- A block is named by what it must hold, never by where it lives: its KV-cache group and the chain hash of the
  prompt's token ids up to the block's end (:func:`chain_keys`, one chain per block size). Two requests with
  the same prefix name the same block; a CPU slot, a load plan or a GPU block id never enters the key, so a
  block that came back from the wrong slot, through a permuted plan or from a stale entry cannot match.
- :meth:`Book.record`: the digest of a block's bytes when the model completed it (one 8-byte digest per layer
  region of the group). Every distinct digest of a key is kept: batches may compute one prefix to different
  bytes, and each of them is a computation of that prefix.
- :meth:`Book.check`: a block at a request's first step (GPU prefix-cache hit or connector load alike) gets
  one verdict: ``v`` it equals a computation of its prefix; ``x`` it matches none (corrupt, whatever broke:
  the store, the slot, the plan, the copy, a late write); ``u`` its prefix was never computed here (nothing
  can vouch for it); ``p`` it still holds the poison written into free blocks before the reload (nothing was
  copied there). An ``x`` says what it holds instead: another prefix's bytes, the poison in part of its
  layers, zeros (a wiped block), or bytes no computation left. ``n`` (a null block: outside a sliding
  window) and ``s`` (a recurrent state between two snapshots, left to the restored-state check) are written
  by the instrument, never counted as verified.
"""

from __future__ import annotations

import hashlib
from array import array
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["DIGEST_BYTES", "Book", "Check", "chain_keys", "differing_regions", "zero_regions"]

DIGEST_BYTES = 8  # one int64 per layer region
MAX_EXAMPLES = 8


def chain_keys(
    token_ids: Sequence[int], block_size: int, count: int, prior: Sequence[bytes] = ()
) -> list[bytes]:
    """The first ``count`` block keys of a prompt: key k hashes key k-1 and the tokens of block k. ``prior``
    holds keys already computed (they are kept, the chain goes on from the last)."""
    keys = list(prior)
    for k in range(len(keys), count):
        tokens = array("q", (int(t) for t in token_ids[k * block_size : (k + 1) * block_size])).tobytes()
        prev = keys[-1] if keys else b""
        keys.append(hashlib.blake2b(prev + tokens, digest_size=16).digest())
    return keys


def zero_regions(digest: bytes) -> int:
    """How many layer regions of a digest read as all zeros. The instrument's digest is a weighted sum of the
    region's words (``digests.Proof``), so a region of zeros digests to exactly 0, and a computed one
    practically never does."""
    return sum(
        digest[i : i + DIGEST_BYTES] == bytes(DIGEST_BYTES) for i in range(0, len(digest), DIGEST_BYTES)
    )


def differing_regions(a: bytes, b: bytes) -> int:
    """How many layer regions two digests of one group disagree in."""
    return sum(
        a[i : i + DIGEST_BYTES] != b[i : i + DIGEST_BYTES]
        for i in range(0, max(len(a), len(b)), DIGEST_BYTES)
    )


@dataclass(frozen=True)
class Check:
    verdict: str  # v, x, u or p
    holds: str = ""  # for x and p: what the block holds instead
    regions_differ: int = 0  # against the closest computation of its prefix


@dataclass
class Book:
    """Reference digests by block key (see the module docstring)."""

    refs: dict[tuple[int, bytes], set[bytes]] = field(default_factory=dict)
    # the first key each digest was computed for: names "another prefix" when a block holds its bytes
    owner: dict[tuple[int, bytes], bytes] = field(default_factory=dict)
    poison: dict[int, bytes] = field(default_factory=dict)  # group -> the digest of a poisoned block
    recorded: int = 0
    variants: int = 0  # keys computed to more than one distinct digest

    def record(self, group: int, key: bytes, digest: bytes) -> None:
        digests = self.refs.setdefault((group, key), set())
        if digest not in digests:
            if digests:
                self.variants += 1
            digests.add(digest)
            self.owner.setdefault((group, digest), key)
        self.recorded += 1

    def check(self, group: int, key: bytes, digest: bytes) -> Check:
        known = self.refs.get((group, key))
        if known and digest in known:
            return Check("v")
        poison = self.poison.get(group)
        if poison is not None and digest == poison:
            return Check("p", holds="the poison: nothing was copied into it")
        other = self.owner.get((group, digest))
        if other is not None and other != key:
            holds = "the bytes of another prefix"
        elif poison is not None and differing_regions(digest, poison) < len(digest) // DIGEST_BYTES:
            holds = "the poison in part of its layers: a partial copy"
        elif zeros := zero_regions(digest):
            regions = len(digest) // DIGEST_BYTES
            where = "every layer region" if zeros == regions else f"{zeros} of {regions} layer regions"
            holds = f"zeros in {where}: wiped, or never written"
        else:
            holds = "bytes that match no computed block"
        if not known:
            return Check("u" if other is None else "x", holds=holds if other is not None else "")
        closest = min(differing_regions(digest, d) for d in known)
        return Check("x", holds=holds, regions_differ=closest)

    def snapshot(self) -> dict[str, Any]:
        return {"blocks_recorded": self.recorded, "keys": len(self.refs), "variants": self.variants}
