"""Child processes of launchers and tests: one free-port function, one spawner, one process-group killer.

Every launcher (the real frontends, `vllm serve`, the benchmarks' servers) starts its child in a session of
its own (so the child leads a process group), with a parent-death signal on Linux, and stops it through
`stop_group`: SIGTERM to the group, SIGKILL after a grace period, then SIGKILL to whatever is left in the
group or descends from the child, found with psutil (no `/proc` walking of our own).
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import IO, Any

import psutil

__all__ = [
    "PORT_RANGE",
    "descendants",
    "free_port",
    "group_alive",
    "group_members",
    "is_running",
    "listener",
    "log_tail",
    "parent_death_signal",
    "spawn",
    "stop_group",
    "wait_for",
    "wait_until_bindable",
]

# Ports handed to child processes are picked below the kernel's ephemeral range: a port from bind(0) may
# be taken by some outgoing connection before the child binds it ("Address already in use").
PORT_RANGE = (20000, 32000)
_handed_out: set[int] = set()
_port_lock = threading.Lock()


def free_port(host: str = "127.0.0.1", *, count: int = 1) -> int:
    """A TCP port on `host` that is free now, outside the ephemeral range, never handed out twice here.

    With `count` > 1, the first of `count` consecutive free ports (all of them handed out): what a
    publisher per data-parallel rank on `port + rank` needs.
    """
    if count < 1:
        raise ValueError(f"count must be >= 1, got {count}")
    with _port_lock:
        for _ in range(500):
            port = random.randrange(PORT_RANGE[0], PORT_RANGE[1] - count + 1)
            ports = range(port, port + count)
            if _handed_out.intersection(ports) or not all(_bindable(host, p) for p in ports):
                continue
            _handed_out.update(ports)
            return port
    raise OSError(f"no {count} free port(s) on {host} in {PORT_RANGE}")


def _bindable(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def listener(host: str = "127.0.0.1", *, backlog: int = 1024) -> socket.socket:
    """A listening TCP socket on a port the kernel picks, for a child that inherits it (`pass_fds`).

    No race: the socket is bound before the child starts. Close it here once the child runs.
    """
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.bind((host, 0))
        s.listen(backlog)
    except OSError:
        s.close()
        raise
    return s


def parent_death_signal(*, thread_bound: bool = False) -> Callable[[], None] | None:
    """A preexec_fn that makes the child get SIGTERM when its parent dies (Linux only).

    The kernel sends it when the *thread* that forked exits, so it is set up only from the main thread:
    a child started from a short-lived worker thread would otherwise die with that thread. With
    `thread_bound`, from any thread: the caller keeps that thread alive as long as the child should live.
    """
    if not sys.platform.startswith("linux"):
        return None
    if not thread_bound and threading.current_thread() is not threading.main_thread():
        return None
    libc_name = ctypes.util.find_library("c")
    if libc_name is None:
        return None
    prctl = ctypes.CDLL(libc_name, use_errno=True).prctl
    pr_set_pdeathsig, term = 1, int(signal.SIGTERM)

    def preexec() -> None:
        prctl(pr_set_pdeathsig, term, 0, 0, 0)

    return preexec


def spawn(
    cmd: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    stdout: IO[Any] | int | None = None,
    pass_fds: Sequence[int] = (),
    cwd: str | os.PathLike[str] | None = None,
    stdin: IO[Any] | int | None = subprocess.DEVNULL,
    merge_stderr: bool = True,
    thread_bound: bool = False,
) -> subprocess.Popen[bytes]:
    """Start `cmd` as the leader of a new process group, stdin closed (or `stdin`, e.g. a pipe).

    stderr joins `stdout` when that is given (unless `merge_stderr` is False: then it is inherited).
    `thread_bound`: the child gets SIGTERM when the spawning thread exits, also when that is not the main
    thread (see `parent_death_signal`).
    """
    return subprocess.Popen(
        list(cmd),
        stdin=stdin,
        stdout=stdout,
        stderr=subprocess.STDOUT if stdout is not None and merge_stderr else None,
        env=None if env is None else dict(env),
        pass_fds=tuple(pass_fds),
        cwd=cwd,
        start_new_session=True,
        preexec_fn=parent_death_signal(thread_bound=thread_bound),  # only a prctl call: safe after fork
    )


def descendants(pid: int) -> list[psutil.Process]:
    """Every live descendant of `pid` (children that changed their group included)."""
    try:
        return [p for p in psutil.Process(pid).children(recursive=True) if _alive(p)]
    except psutil.Error:
        return []


def group_members(pgid: int) -> list[psutil.Process]:
    """Live (non-zombie) processes of process group `pgid`."""
    members = []
    for proc in psutil.process_iter():
        with contextlib.suppress(psutil.Error, OSError):
            if os.getpgid(proc.pid) == pgid and _alive(proc):
                members.append(proc)
    return members


def group_alive(pgid: int) -> bool:
    return bool(group_members(pgid))


def is_running(pid: int) -> bool:
    """Whether process `pid` exists and is not a zombie (exited, not yet reaped)."""
    try:
        return _alive(psutil.Process(pid))
    except psutil.Error:
        return False


def _alive(proc: psutil.Process) -> bool:
    try:
        return bool(proc.status() != psutil.STATUS_ZOMBIE)
    except psutil.Error:
        return False


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def stop_group(proc: subprocess.Popen[Any], *, grace: float = 10.0) -> int | None:
    """Stop a child started by `spawn` and everything it started; returns its exit code. Idempotent.

    SIGTERM to its group, SIGKILL to the group after `grace` seconds, then SIGKILL to any process still in
    the group or descended from the child (one that left the group, or was orphaned when the leader exited).
    """
    pgid = proc.pid  # spawn() made the child its group's leader
    family = descendants(proc.pid)
    if proc.poll() is None or group_alive(pgid):
        _signal_group(pgid, signal.SIGTERM)
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            _signal_group(pgid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(10)
    leftover = {p.pid: p for p in [*group_members(pgid), *family] if _alive(p)}
    for p in leftover.values():
        with contextlib.suppress(psutil.Error):
            p.kill()
    psutil.wait_procs(list(leftover.values()), timeout=10)
    return proc.poll()


def wait_for(predicate: Callable[[], bool], *, deadline: float, interval: float = 0.02, what: str) -> None:
    """Poll `predicate` until it is true; TimeoutError naming `what` after `deadline` seconds."""
    end = time.monotonic() + deadline
    while not predicate():
        if time.monotonic() >= end:
            raise TimeoutError(f"{what} within {deadline:.1f} s")
        time.sleep(interval)


def wait_until_bindable(host: str, *ports: int, deadline: float = 5.0) -> None:
    """Until each port can be bound again the way ZMQ binds (SO_REUSEADDR): after a server on it stopped."""
    end = time.monotonic() + deadline
    for port in ports:
        while True:
            with socket.socket() as s:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                try:
                    s.bind((host, port))
                    break
                except OSError:
                    if time.monotonic() > end:
                        raise
            time.sleep(0.05)


def log_tail(path: str | os.PathLike[str] | None, lines: int = 40, *, missing: str = "") -> str:
    """The last `lines` lines of a child's log file (read from its last 256 KiB); `missing` when none."""
    if path is None or not os.path.exists(path):
        return missing
    with open(path, "rb") as fh:
        fh.seek(0, os.SEEK_END)
        fh.seek(max(0, fh.tell() - 256 * 1024))
        text = fh.read().decode("utf-8", errors="replace")
    return "\n".join(text.splitlines()[-lines:])
