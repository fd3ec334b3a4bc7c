"""Test harness: run the real vLLM frontends against a scripted fake engine core.

Test your own control code against both vLLM HTTP frontends on a machine without a GPU::

    from vllm_devclient.testing import RustFrontend, Return

    with RustFrontend() as fe:
        fe.engine.script("reset_prefix_cache", [Return(False), Return(True)])
        ...  # call fe.base_url with your client; inspect fe.engine.calls

Needs the ``testing`` extra (pyzmq, msgspec, tokenizers, psutil, cryptography) and a vLLM install (``bash
scripts/setup.sh`` in a checkout). Names are imported lazily so that loading the pytest plugin
costs nothing when the fixtures are not used.

By concern: ``engine`` (the scripted engine core), ``kv_publisher`` (an engine that publishes KV-cache
events: ``RustFrontend(engine=PublishingEngine())``), ``frontends`` (the launchers), ``processes``
(ports, child processes, process groups: ``free_port``, ``spawn``, ``stop_group``, ``log_tail``,
``descendants``, ``is_running`` are exported here, for a test that starts a server of its own),
``pytest_plugin`` (the fixtures); the contract harness
in ``contract`` (expectations, recording transport, ``make_client``, runner, masking),
``scenarios`` (the data, one module per route family), ``pool`` (frontends by setup),
``parity`` (the report); for
TLS tests ``certificates`` (a CA and its certificates, made on the spot) and ``tls_proxy`` (https in front
of any plain-http server); the frontends serve https themselves with ``tls=``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .engine import ScriptedEngine
    from .engine_actions import Action, Delay, Hang, Raise, Return
    from .engine_protocol import EngineCall, FinishReason, KVEventsConfigError
    from .engine_state import EngineState
    from .engine_transport import EngineStartupError
    from .frontends import (
        INSTALL_HINT,
        Frontend,
        FrontendStartupError,
        PythonFrontend,
        RustFrontend,
        VllmNotInstalledError,
        find_vllm_rs,
    )
    from .kv_publisher import PublishingEngine, kv_events_config
    from .model_dir import make_model_dir
    from .processes import descendants, free_port, is_running, log_tail, spawn, stop_group

_EXPORTS = {
    "Action": "engine_actions",
    "Delay": "engine_actions",
    "EngineCall": "engine_protocol",
    "EngineStartupError": "engine_transport",
    "EngineState": "engine_state",
    "FinishReason": "engine_protocol",
    "Hang": "engine_actions",
    "KVEventsConfigError": "engine_protocol",
    "PublishingEngine": "kv_publisher",
    "kv_events_config": "kv_publisher",
    "Raise": "engine_actions",
    "Return": "engine_actions",
    "ScriptedEngine": "engine",
    "INSTALL_HINT": "frontends",
    "Frontend": "frontends",
    "FrontendStartupError": "frontends",
    "PythonFrontend": "frontends",
    "RustFrontend": "frontends",
    "VllmNotInstalledError": "frontends",
    "find_vllm_rs": "frontends",
    "make_model_dir": "model_dir",
    "descendants": "processes",
    "free_port": "processes",
    "is_running": "processes",
    "log_tail": "processes",
    "spawn": "processes",
    "stop_group": "processes",
}

__all__ = [
    "INSTALL_HINT",
    "Action",
    "Delay",
    "EngineCall",
    "EngineStartupError",
    "EngineState",
    "FinishReason",
    "Frontend",
    "FrontendStartupError",
    "Hang",
    "KVEventsConfigError",
    "PublishingEngine",
    "PythonFrontend",
    "Raise",
    "Return",
    "RustFrontend",
    "ScriptedEngine",
    "VllmNotInstalledError",
    "descendants",
    "find_vllm_rs",
    "free_port",
    "is_running",
    "kv_events_config",
    "log_tail",
    "make_model_dir",
    "spawn",
    "stop_group",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
