"""Scenario (e): start-up to ready for input, in interactive mode on a pseudo-terminal.

The CLI starts on a pty (120x40) exactly as a user starts it, without a prompt. "Ready" is
the moment its editor is on the terminal, recognised by the footer naming the provider and
model, which both TUIs draw with the editor (pi-actors draws it once the local runtime is up
and has answered the session calls; its plain line loop, on a dumb terminal, prints ``> ``). At that moment the
tree is sampled from ``/proc``: CPU (utime + stime, children already reaped included), the
largest single process's VmHWM, and the sum of VmRSS.

A prompt on screen does not mean all start-up work is done: a CLI may show it while its
processes are still importing in the background (pi-actors does: the coordinator answers
the hello before the provider has imported its SDK). So the tree is then watched until it
is idle — less than 10 ms of CPU in 200 ms, sampled every 20 ms (CPU ticks are 10 ms) —
and the same figures are taken at the start of that idle window: scenario (e idle). Then
the process group is killed.
"""

from __future__ import annotations

import fcntl
import os
import re
import select
import signal
import struct
import subprocess
import termios
import time

from .procs import Measurement, OtherLoad, _rss_kb, proc_cpu_seconds, proc_hwm_kb, reap_orphans, tree_pids

__all__ = ["measure_startup"]


def measure_startup(argv: list[str], *, env: dict[str, str], cwd: str, ready: bytes, timeout: float, keep: set[int]) -> Measurement:
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    env = dict(env, TERM=env.get("TERM") or "xterm-256color")
    pattern = re.compile(ready)
    load = OtherLoad(keep)
    load.start()
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, cwd=cwd, stdin=slave, stdout=slave, stderr=slave, start_new_session=True)
    os.close(slave)
    seen = bytearray()
    wall = None
    deadline = t0 + timeout
    try:
        while time.perf_counter() < deadline:
            r, _, _ = select.select([master], [], [], 0.01)
            if not r:
                if proc.poll() is not None:
                    break
                continue
            try:
                data = os.read(master, 65536)
            except OSError:
                break
            if not data:
                break
            seen += data
            # Only look at the tail: a marker can straddle two reads.
            if pattern.search(seen[-len(data) - 200 :]):
                wall = time.perf_counter() - t0
                break
        pids = tree_pids(proc.pid)
        cpu = sum(proc_cpu_seconds(p) for p in pids)
        hwm = max((proc_hwm_kb(p) for p in pids), default=0)
        tree = sum(_rss_kb(p) for p in pids)
        other = load.stop(cpu)
        idle = _wait_idle(proc.pid, t0, deadline) if wall is not None else None
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
        os.close(master)
        reap_orphans(keep)
    return Measurement(
        wall=wall if wall is not None else float("nan"),
        user=cpu,
        sys=0.0,
        max_rss_kb=hwm,
        tree_rss_kb=tree,
        returncode=0 if wall is not None else 1,
        stdout=bytes(seen),
        extra={"processes": len(pids), "idle": idle, "other_cpus": other},
    )


def _wait_idle(root: int, t0: float, deadline: float, window: float = 0.2, threshold: float = 0.01) -> Measurement | None:
    """Keep watching until the tree used less than ``threshold`` s of CPU over ``window`` s.

    Returns the tree's figures at the start of that idle window (all its start-up work
    done, background imports included), or None if it never went idle before ``deadline``.
    """
    step = 0.02
    history: list[tuple[float, float, list[int]]] = []
    while time.perf_counter() < deadline:
        pids = tree_pids(root)
        now = time.perf_counter()
        history.append((now, sum(proc_cpu_seconds(p) for p in pids), pids))
        # the oldest sample at least `window` ago
        old = [h for h in history if now - h[0] >= window]
        if old:
            t_old, cpu_old, pids_old = old[-1]
            if history[-1][1] - cpu_old < threshold:
                hwm = max((proc_hwm_kb(p) for p in pids), default=0)
                tree = sum(_rss_kb(p) for p in pids)
                return Measurement(wall=t_old - t0, user=cpu_old, sys=0.0, max_rss_kb=hwm, tree_rss_kb=tree, returncode=0,
                                   extra={"processes": len(pids)})
        time.sleep(step)
    return None
