"""The one process-group killer and port picker every launcher uses."""

from __future__ import annotations

import socket
import subprocess
import sys
import time

import psutil

from vllm_devclient.testing.processes import (
    PORT_RANGE,
    descendants,
    free_port,
    group_alive,
    is_running,
    listener,
    spawn,
    stop_group,
    wait_for,
)

# A parent whose child ignores SIGTERM and leaves the process group: stop_group must still end both.
_STUBBORN = """
import os, signal, subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c",
    "import os, signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); os.setpgrp(); time.sleep(60)"])
print(child.pid, flush=True)
time.sleep(60)
"""


def test_stop_group_ends_a_child_that_ignores_sigterm_and_left_the_group() -> None:
    proc = spawn([sys.executable, "-c", _STUBBORN], stdout=subprocess.PIPE)
    assert proc.stdout is not None
    grandchild = int(proc.stdout.readline())
    wait_for(lambda: len(descendants(proc.pid)) == 1, deadline=10, what="the grandchild started")
    started = time.monotonic()
    code = stop_group(proc, grace=1.0)
    assert code is not None
    assert not psutil.pid_exists(grandchild) or psutil.Process(grandchild).status() == psutil.STATUS_ZOMBIE
    assert not group_alive(proc.pid)
    assert time.monotonic() - started < 15
    assert stop_group(proc, grace=1.0) == code  # idempotent


def test_free_port_is_outside_the_ephemeral_range_and_never_repeats() -> None:
    ports = [free_port() for _ in range(50)]
    assert len(set(ports)) == 50
    assert all(PORT_RANGE[0] <= p < PORT_RANGE[1] for p in ports)


def test_wait_for_names_what_it_waited_for() -> None:
    try:
        wait_for(lambda: False, deadline=0.05, what="the moon rising")
    except TimeoutError as exc:
        assert "the moon rising within 0.1 s" in str(exc)
    else:
        raise AssertionError("wait_for returned")


def test_free_port_with_a_count_hands_out_a_free_run_of_ports() -> None:
    first = free_port(count=3)
    again = free_port(count=3)
    assert not set(range(first, first + 3)) & set(range(again, again + 3))
    for port in range(first, first + 3):
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))  # each one is free


def test_listener_is_bound_and_listening_and_is_running_ignores_zombies() -> None:
    with listener() as sock:
        assert sock.getsockname()[1] > 0
        socket.create_connection(sock.getsockname(), timeout=5).close()
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    wait_for(lambda: psutil.Process(proc.pid).status() == psutil.STATUS_ZOMBIE, deadline=10, what="exit")
    assert not is_running(proc.pid)  # exited, not reaped yet
    proc.wait()
    assert not is_running(proc.pid)
    assert is_running(psutil.Process().pid)


def test_a_thread_bound_child_gets_sigterm_when_its_thread_ends() -> None:
    import signal
    import threading

    started: dict[bool, subprocess.Popen[bytes]] = {}

    def start(bound: bool) -> None:
        started[bound] = spawn([sys.executable, "-c", "import time; time.sleep(60)"], thread_bound=bound)

    for bound in (True, False):
        worker = threading.Thread(target=start, args=(bound,))
        worker.start()
        worker.join()
    try:
        assert started[True].wait(10) == -signal.SIGTERM
        assert started[False].poll() is None  # from a worker thread, only when asked for
    finally:
        for proc in started.values():
            stop_group(proc, grace=1.0)
