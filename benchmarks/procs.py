"""Measuring one command: wall time, CPU time and memory of its whole process tree.

How each figure is taken (Linux):

* **wall** — ``time.perf_counter`` from just before ``fork`` to the return of ``wait4``.
* **CPU** — user + system time from the ``rusage`` that ``os.wait4`` returns for the
  command. The kernel adds to a process's counts those of every descendant that was waited
  for, so this covers the whole tree as long as each process reaps its children (both CLIs
  do). Descendants orphaned before they are reaped are re-parented to this process (it makes
  itself a *child subreaper*), reaped here and added, and counted in ``orphans``; one still
  running 2 s after the command ended is killed and listed in ``extra["lingering"]``.
* **largest process** — ``ru_maxrss`` of the same ``wait4``: the peak resident set of the
  largest single process of the tree (the kernel keeps the maximum over waited descendants,
  it does not sum them). Exact, not sampled.
* **tree RSS** — the peak over time of the sum of ``VmRSS`` of every live process of the
  tree, sampled from ``/proc`` every ``poll`` seconds by a thread (pages shared between
  processes count once per process; a process living less than one period may be missed).
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field

__all__ = [
    "Measurement",
    "OtherLoad",
    "become_subreaper",
    "measure",
    "tree_pids",
    "proc_cpu_seconds",
    "proc_hwm_kb",
    "proc_rss_kb",
    "proc_cmdline",
    "reap_orphans",
]

_PAGE_KB = os.sysconf("SC_PAGE_SIZE") // 1024
_CLK_TCK = os.sysconf("SC_CLK_TCK")
_PR_SET_CHILD_SUBREAPER = 36


@dataclass
class Measurement:
    wall: float
    user: float
    sys: float
    max_rss_kb: int
    tree_rss_kb: int
    returncode: int
    stdout: bytes = b""
    stderr: bytes = b""
    orphans: int = 0  # descendants re-parented to us (their parent exited before reaping them)
    extra: dict = field(default_factory=dict)

    @property
    def cpu(self) -> float:
        return self.user + self.sys


def _busy_seconds() -> float:
    """CPU time spent busy by the whole machine since boot (all CPUs, from /proc/stat)."""
    with open("/proc/stat", "rb") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    # user nice system idle iowait irq softirq steal guest guest_nice: busy = all - idle - iowait
    # (guest time is already counted in user).
    return (sum(fields[:8]) - fields[3] - fields[4]) / _CLK_TCK


class OtherLoad:
    """How much CPU *other* processes used while a measurement ran (this machine is shared).

    ``start()`` before the run, ``stop(tree_cpu)`` after: the machine's busy time minus the
    measured tree's CPU, this process's own CPU (the sampler) and the ``keep`` processes'
    (the scripted server), divided by the wall time: "other CPUs busy", 0 on a quiet machine.
    Tick granularity (10 ms per CPU) makes it approximate.
    """

    def __init__(self, keep: Collection[int]) -> None:
        self.keep = set(keep)

    def _mine(self) -> float:
        import resource

        ru = resource.getrusage(resource.RUSAGE_SELF)
        return ru.ru_utime + ru.ru_stime + sum(proc_cpu_seconds(p) for p in self.keep)

    def start(self) -> None:
        self._t0, self._busy0, self._mine0 = time.perf_counter(), _busy_seconds(), self._mine()

    def stop(self, tree_cpu: float) -> float:
        wall = time.perf_counter() - self._t0
        other = (_busy_seconds() - self._busy0) - (self._mine() - self._mine0) - tree_cpu
        return max(0.0, other / wall) if wall > 0 else 0.0


def become_subreaper() -> bool:
    """Make orphaned descendants re-parent to this process (Linux); True on success."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except OSError:  # pragma: no cover - not Linux
        return False


def _stat_fields(pid: int) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read().decode("latin-1")
    except OSError:
        return None
    # comm may hold spaces and parentheses: split after the last ')'.
    return raw[raw.rfind(")") + 2 :].split()


def _ppids() -> dict[int, int]:
    out: dict[int, int] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            fields = _stat_fields(int(name))
            if fields is not None:
                out[int(name)] = int(fields[1])
    return out


def tree_pids(root: int, ppids: dict[int, int] | None = None) -> list[int]:
    """``root`` and all its live descendants."""
    ppids = _ppids() if ppids is None else ppids
    children: dict[int, list[int]] = {}
    for pid, ppid in ppids.items():
        children.setdefault(ppid, []).append(pid)
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        if pid in ppids or pid == root:
            out.append(pid)
        todo.extend(children.get(pid, ()))
    return out


def proc_cpu_seconds(pid: int) -> float:
    """utime + stime + cutime + cstime of a live process (its waited-for children included)."""
    fields = _stat_fields(pid)
    if fields is None:
        return 0.0
    # fields[0] is state (stat field 3); utime is stat field 14 -> index 11.
    return sum(int(x) for x in fields[11:15]) / _CLK_TCK


def _rss_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm", "rb") as f:
            return int(f.read().split()[1]) * _PAGE_KB
    except (OSError, IndexError, ValueError):
        return 0


def proc_rss_kb(pid: int) -> int:
    """The resident set (from ``/proc/PID/statm``) of a live process, in KiB; 0 if it is gone."""
    return _rss_kb(pid)


def proc_cmdline(pid: int) -> str:
    """The command line of a live process, arguments joined by spaces ("" if it is gone)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").strip().decode(errors="replace")
    except OSError:
        return ""


def proc_hwm_kb(pid: int) -> int:
    """The peak resident set (VmHWM) of a live process, in KiB."""
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            for line in f:
                if line.startswith(b"VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


class _TreeSampler(threading.Thread):
    def __init__(self, root: int, period: float) -> None:
        super().__init__(daemon=True)
        self.root, self.period = root, period
        self.peak_kb = 0
        self.names: dict[int, str] = {}  # every pid seen in the tree -> its command line
        self._stop_event = threading.Event()

    def run(self) -> None:
        while not self._stop_event.is_set():
            pids = tree_pids(self.root)
            for pid in pids:
                if pid not in self.names:
                    self.names[pid] = _cmdline(pid)
            total = sum(_rss_kb(pid) for pid in pids)
            self.peak_kb = max(self.peak_kb, total)
            self._stop_event.wait(self.period)

    def stop(self) -> None:
        self._stop_event.set()
        self.join()


def _orphans(exclude: set[int]) -> list[int]:
    me = os.getpid()
    return [pid for pid, ppid in _ppids().items() if ppid == me and pid not in exclude]


def measure(
    argv: list[str],
    *,
    env: dict[str, str],
    cwd: str,
    timeout: float,
    poll: float = 0.05,
    keep: Collection[int] = frozenset(),
    stdin: bytes | None = None,
    interact: Callable[[subprocess.Popen], dict] | None = None,
) -> Measurement:
    """Run ``argv`` to completion and measure its tree (see the module docstring).

    ``keep``: pids of our own children that are not part of the measurement (the scripted
    server), never reaped here. Output is captured through temporary files, so a chatty
    command cannot block on a full pipe. On timeout the command's process group is killed
    and the measurement reports returncode -9.

    ``interact``: a conversation with the command instead of ``stdin``: its stdin and stdout
    are pipes, and ``interact(proc)`` is called at once, in this thread; it must read stdout
    as it comes and close stdin when done. What it returns is added to ``extra``. If it
    raises, the command's process group is killed and the exception propagates.
    """
    import tempfile

    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        before = set(_orphans(set(keep)))
        load = OtherLoad(keep)
        load.start()
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            argv,
            env=env,
            cwd=cwd,
            stdin=subprocess.PIPE if stdin is not None or interact is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE if interact is not None else out,
            stderr=err,
            start_new_session=True,
        )
        sampler = _TreeSampler(proc.pid, poll)
        sampler.start()
        timer = threading.Timer(timeout, lambda: _kill_group(proc.pid))
        timer.start()
        talked: dict = {}
        try:
            if stdin is not None:
                assert proc.stdin is not None
                proc.stdin.write(stdin)
                proc.stdin.close()
            if interact is not None:
                try:
                    talked = interact(proc)
                except BaseException:
                    _kill_group(proc.pid)
                    os.wait4(proc.pid, 0)
                    sampler.stop()
                    raise
            _, status, ru = os.wait4(proc.pid, 0)
        finally:
            timer.cancel()
            if proc.stdout is not None:
                proc.stdout.close()
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)  # Popen must not wait again
        sampler.stop()
        user, sys_, maxrss = ru.ru_utime, ru.ru_stime, ru.ru_maxrss
        # Orphans of the tree (re-parented to us because their parent exited first): reap them
        # and add their times. One still running 2 s after the command ended is killed and
        # reported as lingering; one that had already exited (a zombie nobody reaped) is only
        # counted.
        orphans = [pid for pid in _orphans(set(keep)) if pid not in before]
        orphan_names = sorted({sampler.names.get(pid) or _cmdline(pid) for pid in orphans})
        lingering = []
        deadline = time.monotonic() + 2
        for pid in orphans:
            killed = False
            while True:
                try:
                    done, _, oru = os.wait4(pid, os.WNOHANG)
                except ChildProcessError:
                    break
                if done:
                    user, sys_ = user + oru.ru_utime, sys_ + oru.ru_stime
                    maxrss = max(maxrss, oru.ru_maxrss)
                    break
                if time.monotonic() > deadline and not killed:
                    lingering.append(sampler.names.get(pid) or _cmdline(pid))
                    os.kill(pid, signal.SIGKILL)
                    killed = True
                time.sleep(0.01)
        other = load.stop(user + sys_)
        out.seek(0)
        err.seek(0)
        return Measurement(
            wall=wall,
            user=user,
            sys=sys_,
            max_rss_kb=maxrss,
            tree_rss_kb=sampler.peak_kb,
            returncode=proc.returncode,
            stdout=out.read(),
            stderr=err.read(),
            orphans=len(orphans),
            extra={"other_cpus": other, "orphan_names": orphan_names, "lingering": lingering, **talked},
        )


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            raw = f.read().replace(b"\0", b" ").strip().decode(errors="replace")
    except OSError:
        raw = ""
    if not raw:
        fields = _stat_fields(pid)
        raw = f"<exited, state {fields[0]}>" if fields else "<gone>"
    return raw[-80:]


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def reap_orphans(keep: set[int], timeout: float = 10.0) -> int:
    """Wait for (then kill) every child of ours not in ``keep``; returns how many there were."""
    pids = _orphans(set(keep))
    deadline = time.monotonic() + timeout
    for pid in pids:
        while True:
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                break
            if done:
                break
            if time.monotonic() > deadline:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.01)
    return len(pids)
