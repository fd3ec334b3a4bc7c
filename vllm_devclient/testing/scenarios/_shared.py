"""Pieces more than one scenario family uses."""

from __future__ import annotations

from ..contract import Check, Client, call, resolve

__all__ = ["COLLECTIVE_RPC", "RPC_ARGS", "is_a", "rpc"]

# The engine call `rpc` causes: collective_rpc(method, timeout, args, kwargs).
RPC_ARGS = ("echo", None, [1, "x"], {"k": "v"})
COLLECTIVE_RPC = (call("collective_rpc", *RPC_ARGS),)


def rpc(c: Client) -> object:
    return c.collective_rpc("echo", args=[1, "x"], kwargs={"k": "v"})


def is_a(kind: type, what: str) -> Check:
    """The attribute at path `what` is an instance of `kind`."""
    return Check(f"{what} is a {kind.__name__}", lambda o: isinstance(resolve(o, what), kind))
