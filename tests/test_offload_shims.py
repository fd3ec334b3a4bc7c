"""The offload check's own older names."""

from __future__ import annotations


def test_the_old_offload_check_names_are_still_there() -> None:
    import vllm_devclient.offload_check as oc

    for name in ("PROFILES", "CheckCase", "ServerIO", "run_case", "run_check", "settle", "main", "judge"):
        assert hasattr(oc, name)
    assert oc.open_store_watcher is oc.open_event_watcher
