"""Test-only: where the reference instrument reads the KV a forward is about to read (``digests.Proof.read``),
found on the worker's model runner, no vLLM import: the V1 runner's ``_model_forward`` (after the KV
connector started its loads, inside the forward context, on the compute stream), or the V2 runner's KV
connector's ``pre_forward`` (called right before the model). A runner with neither is read at the start of the
worker's ``execute_model``, before the connector starts its loads: the snapshot names the point
(``read_point``)."""

from __future__ import annotations

from typing import Any, Protocol

__all__ = ["WORKER_POINT", "install_read_point"]

WORKER_POINT = "worker.execute_model"


class _Reader(Protocol):
    def read(self) -> None: ...


def install_read_point(worker: Any, proof: _Reader) -> str:
    """Hook ``proof.read`` right before the forward of the worker's model runner; the point's name."""
    runner = getattr(worker, "model_runner", None)
    forward = getattr(runner, "_model_forward", None)  # the V1 runner
    if forward is not None:

        def read_then_forward(*args: Any, **kwargs: Any) -> Any:
            proof.read()
            return forward(*args, **kwargs)

        runner._model_forward = read_then_forward  # type: ignore[union-attr]
        return "model_runner._model_forward"
    connector = getattr(runner, "kv_connector", None)  # the V2 runner calls it right before the forward
    pre_forward = getattr(connector, "pre_forward", None)
    if pre_forward is not None:

        def pre_forward_then_read(*args: Any, **kwargs: Any) -> Any:
            result = pre_forward(*args, **kwargs)
            proof.read()
            return result

        connector.pre_forward = pre_forward_then_read  # type: ignore[union-attr]
        return "model_runner.kv_connector.pre_forward"
    return WORKER_POINT
