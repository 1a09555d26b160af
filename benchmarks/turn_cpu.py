"""CPU per turn of each process of a multi-turn ``-p`` run: ``python -m benchmarks.turn_cpu``.

    .venv/bin/python -m benchmarks.turn_cpu turns-100 [--old OTHER/bin/pi-actors] [--runs 3] [--window 0.2:0.8]

Runs the scenario (a session written, as in ``benchmarks.ab``) against the scripted server
while a thread samples ``utime + stime`` of every process of the CLI's tree from ``/proc``
every 10 ms. The server's request log gives the moment each turn's request arrived; each
process's CPU between the request of the turn at 20% and the one at 80% of the run, divided
by the turns between, is its CPU per turn (start-up and shutdown left out; ``--window A:B``
measures another stretch). Processes are
grouped by their role (the actor name a child's command line ends with; the CLI itself is
``cli``). With ``--old``, runs of the two builds alternate (old, new, new, old, ...), and the
medians per build are printed side by side. Also printed: the median client time per turn
(server clock, as ``benchmarks.ab``) and the requests' span per turn.
"""

from __future__ import annotations

import argparse
import bisect
import os
import shutil
import statistics
import subprocess
import tempfile
import threading
import time
import uuid
from pathlib import Path

from . import scenarios as S
from .clis import PiActors
from .e2e import Server, turn_gaps
from .procs import become_subreaper, proc_cmdline, reap_orphans, tree_pids

_CLK_TCK = os.sysconf("SC_CLK_TCK")


def _cpu_ticks(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return None
    fields = data[data.rfind(b")") + 2 :].split()
    return int(fields[11]) + int(fields[12])


#: The role of a process forked from the CLI and not yet retitled (``runtime.fork_actor``
#: writes the actor's command line right after the fork): looked at again at the next sample.
_UNTITLED = "cli-fork"


def _role(pid: int, root: int) -> str:
    if pid == root:
        return "cli"
    cmd = proc_cmdline(pid)
    if cmd == proc_cmdline(root):
        return _UNTITLED
    if "pi_actors.runtime.child" in cmd:
        return cmd.split("pi_actors.runtime.child", 1)[1].split()[0]
    if "bwrap" in cmd or cmd.startswith(("bash", "/bin/bash", "/usr/bin/bash")):
        return "bash/bwrap"
    return os.path.basename(cmd.split(" ", 1)[0]) or "?"


def run_once(cli: PiActors, server: Server, name: str, work: Path,
             window: tuple[float, float] = (0.2, 0.8)) -> dict[str, float]:
    run_id = f"tc{uuid.uuid4().hex[:10]}"
    cwd = Path(tempfile.mkdtemp(prefix="work-", dir=work))
    sessions = Path(tempfile.mkdtemp(prefix="sessions-", dir=work))
    argv = cli.argv(S.prompt_for(name, run_id), session_dir=str(sessions))
    samples: dict[int, list[tuple[float, int]]] = {}
    roles: dict[int, str] = {}
    proc = subprocess.Popen(argv, env=cli.env(), cwd=str(cwd), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            now = time.time()
            for pid in tree_pids(proc.pid):
                ticks = _cpu_ticks(pid)
                if ticks is None:
                    continue
                if roles.get(pid, _UNTITLED) == _UNTITLED:
                    roles[pid] = _role(pid, proc.pid)
                samples.setdefault(pid, []).append((now, ticks))
            time.sleep(0.01)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        proc.wait(timeout=900)
    finally:
        done.set()
        sampler.join()
        reap_orphans({server.proc.pid})
    times = server.request_times(run_id)
    gaps = turn_gaps(server.reply_times(run_id, len(times)))
    shutil.rmtree(cwd, ignore_errors=True)
    shutil.rmtree(sessions, ignore_errors=True)
    if len(times) < 10:
        raise RuntimeError(f"only {len(times)} requests reached the server")
    i0, i1 = int(len(times) * window[0]), min(int(len(times) * window[1]), len(times) - 1)
    t0, t1 = times[i0], times[i1]
    turns = i1 - i0

    def at(series: list[tuple[float, int]], t: float) -> int:
        k = bisect.bisect_right([s[0] for s in series], t) - 1
        return series[k][1] if k >= 0 else 0

    out: dict[str, float] = {}
    for pid, series in samples.items():
        used = at(series, t1) - at(series, t0)
        if used:
            out[roles[pid]] = out.get(roles[pid], 0.0) + used / _CLK_TCK / turns
    out["ALL"] = sum(v for k, v in out.items())
    out["client/turn"] = statistics.median(gaps) if gaps else float("nan")
    out["span/turn"] = (times[-1] - times[0]) / (len(times) - 1)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.turn_cpu")
    p.add_argument("scenario", help="turns-N or bulkturns-N")
    p.add_argument("--old", help="another build's pi-actors executable (alternate with it)")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--window", default="0.2:0.8",
                   help="the stretch of the run measured, as fractions of its requests (default 0.2:0.8; "
                        "e.g. 0.05:0.25 and 0.75:0.95 to see what grows with the session)")
    args = p.parse_args(argv)
    window = tuple(float(x) for x in args.window.split(":"))
    if len(window) != 2 or not 0 <= window[0] < window[1] <= 1:
        p.error(f"--window must be A:B with 0 <= A < B <= 1, not {args.window!r}")
    become_subreaper()
    work = Path(tempfile.mkdtemp(prefix="pi-actors-turncpu-"))
    server = Server(work)
    results: dict[str, list[dict[str, float]]] = {"old": [], "new": []}
    try:
        clis = {"new": PiActors(work / "home-new", server.port)}
        order = ["new"]
        if args.old:
            clis["old"] = PiActors(work / "home-old", server.port, executable=args.old)
            order = ["old", "new", "new", "old"]
        for i in range(args.runs * len(clis)):
            which = order[i % len(order)]
            r = run_once(clis[which], server, args.scenario, work, (window[0], window[1]))
            results[which].append(r)
            print(which, "  ".join(f"{k} {v * 1000:.2f}" for k, v in sorted(r.items())), "(ms/turn)", flush=True)
    finally:
        server.close()
        shutil.rmtree(work, ignore_errors=True)
    keys = sorted({k for rows in results.values() for r in rows for k in r})
    print(f"{'median ms/turn':<16}" + "".join(f"{w:>10}" for w in results if results[w]))
    for k in keys:
        print(f"{k:<16}" + "".join(f"{statistics.median(r.get(k, 0.0) for r in rows) * 1000:>10.2f}" for rows in results.values() if rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
