"""KV-cache events accounted per cache group: what the offload check asserts about stores, removes and resets.

vLLM stamps every ``BlockStored``/``BlockRemoved`` with the KV-cache group it belongs to (``group_idx``);
GPU stores also carry the group's spec kind (``kv_cache_spec_kind``: ``full_attention``, ``sliding_window``,
``mamba``, ``mla_attention``...). The OffloadingConnector's CPU-tier events carry ``group_idx`` and, by
default, a *placeholder* payload: one hash per offloaded chunk, ``token_ids=[]``, ``block_size=0``. With
``kv_connector_extra_config.self_describing_kv_events=true`` its stores for full-attention groups carry the
chunk's per-block hashes and its tokens (``len(token_ids) == block_size * len(block_hashes)``), while other
groups keep the placeholder. A chunk overlapping a shared prefix re-announces hashes already announced, so a
consumer must reference-count them. ``AllBlocksCleared`` (no medium) follows a successful GPU reset.
Older releases (vLLM 0.23.0's OffloadingConnector, for one) send CPU-tier stores *ungrouped*: no
``group_idx``, one event per stored job with its blocks' hashes (of every group), no tokens,
``block_size=0``. Which group a CPU store holds then cannot be told, so the per-group coverage check is not
made (``ungrouped_cpu_blocks``).

:class:`GroupEventAccount` counts stores and removes per (medium, group_idx), learns each group's kind from
the events that carry one, keeps a reference count per hash, and checks the payload rules above. It does no
I/O; :class:`EventWatcher` feeds it from a :class:`~vllm_devclient.kv_events.KVEventSubscriber`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "FULL_ATTENTION_KINDS",
    "EventGroupSummary",
    "EventWatcher",
    "GroupEventAccount",
    "KVEventsSummary",
    "open_event_watcher",
]

# Kinds whose blocks hold the whole prefix: the groups an offloading connector must store in full.
FULL_ATTENTION_KINDS = frozenset({"full_attention", "mla_attention", "sink_full_attention"})
_MAX_PROBLEMS = 20


class EventGroupSummary(BaseModel):
    """What one (medium, group) saw."""

    model_config = ConfigDict(frozen=True)

    medium: str | None
    group_idx: int | None
    kind: str | None
    stored_events: int
    stored_blocks: int
    removed_events: int
    removed_blocks: int
    live_blocks: int = Field(description="distinct hashes stored and not removed (reference-counted)")
    repeated_stores: int = Field(description="stores of a hash that was already live")


class KVEventsSummary(BaseModel):
    """The per-group accounting of one case, as the report keeps it."""

    model_config = ConfigDict(frozen=True)

    self_describing: bool
    groups: list[EventGroupSummary]
    group_kinds: dict[int, str]
    gpu_full_attention_groups: list[int]
    cpu_stored_groups: list[int]
    missing_cpu_groups: list[int] = Field(
        description="full-attention groups with GPU stores and no CPU store"
    )
    ungrouped_cpu_blocks: int = Field(
        default=0,
        description="CPU-tier blocks stored without a group_idx (a release before the group stamp): while "
        "there are any, missing_cpu_groups is not checked",
    )
    cleared: int
    unknown_events: int
    payload_problems: list[str]
    refcount_problems: list[str]

    def cpu_blocks_by_group(self) -> dict[int | None, int]:
        return {g.group_idx: g.stored_blocks for g in self.groups if g.medium == "CPU"}


@dataclass
class _Counts:
    stored_events: int = 0
    stored_blocks: int = 0
    removed_events: int = 0
    removed_blocks: int = 0
    repeated_stores: int = 0
    live: Counter[Any] = field(default_factory=Counter)


@dataclass(frozen=True)
class _Mark:
    stores: dict[tuple[str | None, int | None], int]
    removes: dict[tuple[str | None, int | None], int]
    cleared: int


@dataclass(frozen=True)
class AccountDelta:
    """Growth of the account since a mark."""

    stored_blocks: dict[tuple[str | None, int | None], int]
    removed_blocks: dict[tuple[str | None, int | None], int]
    cleared: int

    def stored(self, medium: str | None) -> int:
        return sum(v for (m, _), v in self.stored_blocks.items() if m == medium)

    def removed(self, medium: str | None) -> int:
        return sum(v for (m, _), v in self.removed_blocks.items() if m == medium)


class GroupEventAccount:
    """Stores and removes per (medium, group_idx), group kinds, hash reference counts, payload checks.

    Events are duck-typed by class name (``BlockStored``, ``BlockRemoved``, ``AllBlocksCleared``), so both
    this package's decoded events and vLLM's own ``vllm.distributed.kv_events`` classes are accepted.
    ``self_describing`` says whether the server was asked for self-describing CPU events.
    """

    def __init__(self, *, self_describing: bool = False) -> None:
        self.self_describing = self_describing
        self._counts: dict[tuple[str | None, int | None], _Counts] = {}
        self.kinds: dict[int, str] = {}
        self.cleared = 0
        self.unknown = 0
        self.payload_problems: list[str] = []
        self.refcount_problems: list[str] = []
        self._cpu_events: list[tuple[int | None, int, int, int]] = []  # group, hashes, tokens, block_size
        self._marks: dict[str, _Mark] = {}
        self._phase = "start"  # the last mark: where in the sequence a problem was seen

    # ------------------------------------------------------------------ feeding

    def add(self, events: Iterable[Any]) -> None:
        for ev in events:
            name = type(ev).__name__
            if name == "BlockStored":
                self._stored(ev)
            elif name == "BlockRemoved":
                self._removed(ev)
            elif name == "AllBlocksCleared":
                self.cleared += 1
                # Sent by the GPU pool after a successful reset: every GPU block is gone.
                for (medium, _), counts in self._counts.items():
                    if medium == "GPU":
                        counts.live.clear()
            else:
                self.unknown += 1

    def _counts_for(self, medium: str | None, group: int | None) -> _Counts:
        key = (medium, group)
        counts = self._counts.get(key)
        if counts is None:
            counts = self._counts[key] = _Counts()
        return counts

    def _stored(self, ev: Any) -> None:
        medium, group = ev.medium, getattr(ev, "group_idx", None)
        kind = getattr(ev, "kv_cache_spec_kind", None)
        if kind is not None and group is not None:
            known = self.kinds.setdefault(group, kind)
            if known != kind:
                self._problem(self.payload_problems, f"group {group} announced as {known} and as {kind}")
        hashes = list(ev.block_hashes)
        counts = self._counts_for(medium, group)
        counts.stored_events += 1
        counts.stored_blocks += len(hashes)
        for h in hashes:
            if counts.live[h] > 0:
                counts.repeated_stores += 1
            counts.live[h] += 1
        if medium == "CPU":
            self._cpu_events.append((group, len(hashes), len(ev.token_ids), int(ev.block_size)))

    def _removed(self, ev: Any) -> None:
        medium, group = ev.medium, getattr(ev, "group_idx", None)
        counts = self._counts_for(medium, group)
        counts.removed_events += 1
        counts.removed_blocks += len(ev.block_hashes)
        for h in ev.block_hashes:
            if counts.live[h] <= 0:
                self._problem(
                    self.refcount_problems,
                    f"{medium} group {group}: removed hash {h!r} that is not stored (count would go below 0; "
                    f"after {self._phase}, {self.cleared} AllBlocksCleared so far)",
                )
                continue
            counts.live[h] -= 1
            if counts.live[h] == 0:
                del counts.live[h]

    @staticmethod
    def _problem(bucket: list[str], message: str) -> None:
        if len(bucket) < _MAX_PROBLEMS:
            bucket.append(message)

    # ------------------------------------------------------------------ reading

    def stored_blocks(self, medium: str | None = "CPU") -> int:
        return sum(c.stored_blocks for (m, _), c in self._counts.items() if m == medium)

    def removed_blocks(self, medium: str | None = "CPU") -> int:
        return sum(c.removed_blocks for (m, _), c in self._counts.items() if m == medium)

    def live_blocks(self, medium: str | None = "CPU") -> int:
        """Distinct hashes ``medium`` holds now (stored and not removed)."""
        return sum(len(c.live) for (m, _), c in self._counts.items() if m == medium)

    def groups_with_stores(self, medium: str) -> list[int]:
        return sorted(
            g for (m, g), c in self._counts.items() if m == medium and g is not None and c.stored_blocks
        )

    def gpu_full_attention_groups(self) -> list[int]:
        """Groups the GPU events show, whose kind is full attention (or MLA, which holds the full prefix)."""
        return sorted(g for g in self.groups_with_stores("GPU") if self.kinds.get(g) in FULL_ATTENTION_KINDS)

    def ungrouped_cpu_blocks(self) -> int:
        counts = self._counts.get(("CPU", None))
        return counts.stored_blocks if counts else 0

    def missing_cpu_groups(self) -> list[int]:
        # An ungrouped store may hold any group's blocks: no group can be called missing.
        if self.ungrouped_cpu_blocks():
            return []
        cpu = set(self.groups_with_stores("CPU"))
        return [g for g in self.gpu_full_attention_groups() if g not in cpu]

    def mark(self, name: str) -> None:
        """Remember the counters now; :meth:`since` gives the growth after this point."""
        self._phase = name
        self._marks[name] = _Mark(
            stores={k: c.stored_blocks for k, c in self._counts.items()},
            removes={k: c.removed_blocks for k, c in self._counts.items()},
            cleared=self.cleared,
        )

    def since(self, name: str) -> AccountDelta:
        mark = self._marks[name]
        return AccountDelta(
            stored_blocks={k: c.stored_blocks - mark.stores.get(k, 0) for k, c in self._counts.items()},
            removed_blocks={k: c.removed_blocks - mark.removes.get(k, 0) for k, c in self._counts.items()},
            cleared=self.cleared - mark.cleared,
        )

    def payload_check(self) -> list[str]:
        """CPU stores against the payload rules (self-describing for full attention, else placeholders)."""
        problems = list(self.payload_problems)
        bad: Counter[str] = Counter()
        example: dict[str, str] = {}
        for group, n_hashes, n_tokens, block_size in self._cpu_events:
            kind = self.kinds.get(group) if group is not None else None
            full = kind in FULL_ATTENTION_KINDS
            if group is None:
                ok = n_tokens == 0 and block_size == 0 and n_hashes >= 1
                rule = "ungrouped (no group_idx: one job's hashes, no tokens, block_size 0)"
            elif self.self_describing and full:
                ok = block_size > 0 and n_tokens == block_size * n_hashes
                rule = "self-describing (token_ids = block_size x hashes)"
            else:
                ok = n_tokens == 0 and block_size == 0 and n_hashes == 1
                rule = "placeholder (one hash, no tokens, block_size 0)"
            if not ok:
                key = f"group {group} ({kind or 'kind unknown'}) expected {rule}"
                bad[key] += 1
                example.setdefault(key, f"hashes={n_hashes} tokens={n_tokens} block_size={block_size}")
        problems += [f"{key}: {n} CPU store(s) differ, e.g. {example[key]}" for key, n in bad.items()]
        return problems

    def summary(self) -> KVEventsSummary:
        groups = [
            EventGroupSummary(
                medium=medium,
                group_idx=group,
                kind=self.kinds.get(group) if group is not None else None,
                stored_events=c.stored_events,
                stored_blocks=c.stored_blocks,
                removed_events=c.removed_events,
                removed_blocks=c.removed_blocks,
                live_blocks=len(c.live),
                repeated_stores=c.repeated_stores,
            )
            for (medium, group), c in sorted(
                self._counts.items(), key=lambda kv: (str(kv[0][0]), -1 if kv[0][1] is None else kv[0][1])
            )
        ]
        return KVEventsSummary(
            self_describing=self.self_describing,
            groups=groups,
            group_kinds=dict(sorted(self.kinds.items())),
            gpu_full_attention_groups=self.gpu_full_attention_groups(),
            cpu_stored_groups=self.groups_with_stores("CPU"),
            missing_cpu_groups=self.missing_cpu_groups(),
            ungrouped_cpu_blocks=self.ungrouped_cpu_blocks(),
            cleared=self.cleared,
            unknown_events=self.unknown,
            payload_problems=self.payload_check(),
            refcount_problems=list(self.refcount_problems),
        )


class _Subscriber(Protocol):
    def poll(self, timeout: float = ...) -> Any: ...
    def close(self) -> None: ...


class EventWatcher:
    """Drains a KV-events subscriber into a :class:`GroupEventAccount`."""

    def __init__(self, subscriber: _Subscriber, account: GroupEventAccount) -> None:
        self._sub = subscriber
        self.account = account

    def drain(self) -> GroupEventAccount:
        # A short non-zero wait: a zero timeout may return before the sockets are read at all.
        while True:
            batch = self._sub.poll(0.005)
            if batch is None:
                return self.account
            self.account.add(batch.events)

    def cpu_blocks(self) -> int:
        return self.drain().stored_blocks("CPU")

    def close(self) -> None:
        self._sub.close()


def open_event_watcher(settings: Any, *, self_describing: bool = False) -> EventWatcher:
    """A KV-events subscriber (bound or connected as ``settings`` says) that feeds a fresh account."""
    from vllm_devclient.kv_events import KVEventSubscriber

    subscriber = KVEventSubscriber(
        settings.subscriber_endpoint, topic=settings.topic, bind=settings.subscriber_binds
    )
    return EventWatcher(subscriber, GroupEventAccount(self_describing=self_describing))
