"""Test-only: where a worker's KV lies, as the reference instrument (``digests.Proof``) reads it (torch only).

:func:`regions` gives every layer's blocks as rows of bytes (block-major, as vLLM lays them out; a recurrent
layer through its first state tensor; a K/V-outermost layer, vLLM 0.20-0.22's FLASH_ATTN, as a K region and
a V region), by KV-cache group; one region per distinct memory region. A layer whose block is not one dense
page in memory (a cross-layer cache, which splits a layer's page by head under HND; K/V leading the shape
over block-major memory, vLLM 0.22's hybrids) is read through its own logical view, gathered: the elements
its kernels read, never another layer's.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import torch

__all__ = ["Group", "Region", "ident", "regions"]


@dataclass
class Region:
    # (num_blocks, page) int8 view of one memory region; gathered: the layer's logical (num_blocks, ...) view
    # as integers of its element size, any strides
    rows: torch.Tensor
    width: int  # bytes of a page that hold data (unpadded), a multiple of 4
    layer: str
    gathered: bool = False


@dataclass
class Group:
    index: int
    block_size: int
    recurrent: bool
    every_boundary: bool  # a recurrent group with mamba_cache_mode=all keeps a state at each boundary
    regions: list[Region]


def _unpadded(spec: Any) -> int:
    """The bytes of a page a kernel writes (a hybrid pads attention pages up to the recurrent page size)."""
    try:
        if "Mamba" not in type(spec).__name__ and hasattr(spec, "unpadded_page_size_bytes"):
            return int(spec.unpadded_page_size_bytes)
        if getattr(spec, "page_size_padded", None) is not None:  # before vLLM 0.26 for attention too
            return int(replace(spec, page_size_padded=None).page_size_bytes)
        return int(spec.page_size_bytes)
    except Exception:
        return int(spec.page_size_bytes)


def _kv_outermost(kv: torch.Tensor) -> bool:
    """FLASH_ATTN's (2, num_blocks, ...) layout in vLLM 0.20-0.22: all K blocks, then all V blocks."""
    return kv.dim() >= 3 and kv.shape[0] == 2 and kv.stride(0) > kv.stride(1)


def _rows(tensor: torch.Tensor, num_blocks: int, page: int, stride: int) -> torch.Tensor:
    raw = torch.empty(0, dtype=torch.int8, device=tensor.device).set_(tensor.untyped_storage())
    offset = tensor.storage_offset() * tensor.element_size()
    return torch.as_strided(raw, (num_blocks, page), (stride, 1), offset)


_INTS = {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def ident(rows: torch.Tensor) -> tuple[int, int, int]:
    """Where a region's rows lie: two regions with the same are one memory region."""
    return (rows.untyped_storage().data_ptr(), int(rows.storage_offset()), rows.stride(0))


def _block_major(kv: torch.Tensor, stride: int) -> bool:
    """Whether ``kv``'s blocks lie at ``stride`` bytes, each one dense run of bytes: readable as raw rows."""
    block = kv[0]
    span = sum((n - 1) * st for n, st in zip(block.shape, block.stride(), strict=True)) + 1
    return kv.stride(0) * kv.element_size() == stride and span == block.numel()


def _block_views(layer: str, kv: torch.Tensor, num_blocks: int) -> list[torch.Tensor]:
    """The layer's KV as logical views with the block dimension first, as integers of its element size: the
    tensor itself, or its K and V halves where (2, blocks) leads the shape. A kernel block smaller than the
    group's (a hybrid's attention at 64 tokens a kernel block, 256 a block: vLLM 0.22) counts ``m`` kernel
    blocks a block, block b being kernel blocks b*m .. b*m+m-1: they are unflattened into one."""

    def counts_blocks(n: int) -> bool:
        return n >= num_blocks and n % num_blocks == 0

    if kv.dim() >= 3 and kv.shape[0] == 2 and counts_blocks(kv.shape[1]):
        halves = [kv[0], kv[1]]
    elif kv.dim() >= 2 and counts_blocks(kv.shape[0]):
        halves = [kv]
    else:
        raise ValueError(
            f"layer {layer}: a KV cache of shape {tuple(kv.shape)} has no dimension of its {num_blocks} "
            "blocks where the reference digests look for one (first, or second after K/V)"
        )
    if kv.element_size() not in _INTS:
        raise ValueError(f"layer {layer}: elements of {kv.element_size()} bytes")
    per = [
        h.unflatten(0, (num_blocks, h.shape[0] // num_blocks))  # type: ignore[no-untyped-call]
        if h.shape[0] != num_blocks
        else h
        for h in halves
    ]
    return [h.view(_INTS[kv.element_size()]) for h in per]


def _layer_regions(layer: str, kv: Any, lspec: Any, num_blocks: int, packed: bool) -> list[Region]:
    """One layer's regions: its KV read as rows where its blocks are dense pages, else gathered.
    ``packed``: the layer shares a tensor whose blocks lie at the tensor's own stride."""
    page = int(lspec.page_size_bytes)
    width = _unpadded(lspec) // 4 * 4
    if isinstance(kv, (list, tuple)):  # a recurrent layer: its states share one block-major region
        if not kv:
            return []
        return [Region(rows=_rows(kv[0], num_blocks, page, page), width=width, layer=layer)]
    if _kv_outermost(kv):  # a block is a K row in one half and a V row in the other
        half = kv.stride(1) * kv.element_size()
        return [
            Region(
                rows=_rows(part, num_blocks, half, half), width=_unpadded(lspec) // 2 // 4 * 4, layer=layer
            )
            for part in (kv[0], kv[1])
        ]
    stride = kv.stride(0) * kv.element_size() if packed else page
    if _block_major(kv, stride):
        return [Region(rows=_rows(kv, num_blocks, page, stride), width=width, layer=layer)]
    return [
        Region(rows=v, width=v[0].numel() * v.element_size() // 4 * 4, layer=layer, gathered=True)
        for v in _block_views(layer, kv, num_blocks)
    ]


def regions(kv_cache_config: Any, forward_context: dict[str, Any]) -> list[Group]:
    """Every KV-cache group with its block size, kind and distinct memory regions."""
    num_blocks = int(kv_cache_config.num_blocks)
    packed = {
        name
        for t in kv_cache_config.kv_cache_tensors
        if getattr(t, "block_stride", 0) > 0
        for name in t.shared_by
    }
    groups = []
    for g, group in enumerate(kv_cache_config.kv_cache_groups):
        # Groups share memory (each owns its own blocks of it): a region is distinct within its group only.
        seen: set[tuple[int, int, int]] = set()
        spec = group.kv_cache_spec
        per_layer = getattr(spec, "kv_cache_specs", {}) or {}
        found: list[Region] = []
        for layer in group.layer_names:
            kv = getattr(forward_context.get(layer), "kv_cache", None)
            if kv is None:
                continue
            for region in _layer_regions(layer, kv, per_layer.get(layer, spec), num_blocks, layer in packed):
                if ident(region.rows) not in seen:
                    seen.add(ident(region.rows))
                    found.append(region)
        groups.append(
            Group(
                index=g,
                block_size=int(spec.block_size),
                recurrent="Mamba" in type(spec).__name__,
                every_boundary=getattr(spec, "mamba_cache_mode", None) == "all",
                regions=found,
            )
        )
    return groups
