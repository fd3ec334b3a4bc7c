"""Deprecated: the managed ``vllm serve`` moved to :mod:`vllm_devclient.offload_check.server`."""

import warnings

from vllm_devclient.offload_check.server import (
    CONNECTORS,
    Connector,
    Frontend,
    KVEventsSettings,
    ServerConfig,
    ServerStartError,
    VllmServer,
    build_command,
    build_env,
    free_port,
    kv_transfer_config,
)

warnings.warn(
    "vllm_devclient.server moved to vllm_devclient.offload_check.server; "
    "the old name goes in the next release",
    DeprecationWarning,
    stacklevel=2,
)

__all__ = [
    "CONNECTORS",
    "Connector",
    "Frontend",
    "KVEventsSettings",
    "ServerConfig",
    "ServerStartError",
    "VllmServer",
    "build_command",
    "build_env",
    "free_port",
    "kv_transfer_config",
]
