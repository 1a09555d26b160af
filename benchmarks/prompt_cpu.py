"""CPU per rpc prompt of each process, and the prompt's latency: ``python -m benchmarks.prompt_cpu``.

    .venv/bin/python -m benchmarks.prompt_cpu [--prompts 100] [--old OTHER/bin/pi-actors] [--pi]
        [--runs 3] [--window 20:60] [--window 240:280]

The rpc counterpart of ``benchmarks.turn_cpu``: drives ``--mode rpc`` as scenario (g) does
(``benchmarks.rpc_drive``'s prompts, one ``bash`` call each, session written) and, after each
prompt's ``agent_end`` has been read, reads ``utime + stime`` of every process of the CLI's tree
and of the scripted server from ``/proc``. For each window ``A:B`` of prompts it prints each
process's CPU per prompt between the reading after prompt A and the one after prompt B, grouped
by role (the actor name; ``cli``; ``server``; the sandboxed workers show as ``python3``), and the
median latency of those prompts (written → its ``agent_end`` read). A process that ends between
two readings (a ``bash``) is not seen: its CPU is missing from every figure. A warm spare counts
under its role: the spares start after the first run (rpc mode), so an early window that holds
their start-up shows it (the default window starts at prompt 20).

With ``--old``, runs of the two builds alternate (old, new, new, old, ...); with ``--pi``, pi
takes the old build's place (its one node process shows as ``cli``). Medians per build follow.
Why: (g)'s figures say whether a session slows down; this says which process does what, and
whether a process of ours or the benchmark's own server is the one that grows.
"""

from __future__ import annotations

import argparse
import json
import queue
import shutil
import statistics
import subprocess
import tempfile
import threading
import time
import uuid
from pathlib import Path

from . import scenarios as S
from .clis import Pi, PiActors, find_pi
from .e2e import Server
from .procs import become_subreaper, reap_orphans, tree_pids
from .rpc_drive import _reader
from .turn_cpu import _CLK_TCK, _cpu_ticks, _role


def run_once(cli: PiActors | Pi, server: Server, prompts: int, work: Path,
             windows: list[tuple[int, int]]) -> list[dict[str, float]]:
    """One session of ``prompts`` prompts; per window, ms of CPU per prompt by role and ``latency``."""
    run_id = f"pc{uuid.uuid4().hex[:10]}"
    scenario = f"prompts-{prompts}"
    cwd = Path(tempfile.mkdtemp(prefix="work-", dir=work))
    sessions = Path(tempfile.mkdtemp(prefix="sessions-", dir=work))
    proc = subprocess.Popen(cli.argv(None, session_dir=str(sessions), rpc=True), env=cli.env(), cwd=str(cwd),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert proc.stdin is not None
    events: queue.Queue = queue.Queue()
    threading.Thread(target=_reader, args=(proc.stdout, events), daemon=True).start()
    roles: dict[int, str] = {}
    readings: list[dict[str, int]] = []
    latencies: list[float] = []
    try:
        for i in range(1, prompts + 1):
            text = S.prompt_for(scenario, run_id) if i == 1 else S.next_prompt(i)
            start = time.perf_counter()
            proc.stdin.write(json.dumps({"id": f"p{i}", "type": "prompt", "message": text}).encode() + b"\n")
            proc.stdin.flush()
            when, line = events.get(timeout=60)
            if not line or S.prompt_done(i).encode() not in line:
                raise RuntimeError(f"prompt {i}: no agent_end with its answer: {line[-200:]!r}")
            latencies.append(when - start)
            reading: dict[str, int] = {}
            for pid in [*tree_pids(proc.pid), server.proc.pid]:
                ticks = _cpu_ticks(pid)
                if ticks is None:
                    continue
                if pid not in roles:
                    roles[pid] = "server" if pid == server.proc.pid else _role(pid, proc.pid)
                reading[roles[pid]] = reading.get(roles[pid], 0) + ticks
            readings.append(reading)
    finally:
        proc.stdin.close()
        try:
            proc.wait(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            reap_orphans({server.proc.pid})
            shutil.rmtree(cwd, ignore_errors=True)
            shutil.rmtree(sessions, ignore_errors=True)
    out = []
    for a, b in windows:
        first, last = readings[a - 1], readings[b - 1]  # after prompt a, after prompt b
        figures = {k: (last.get(k, 0) - first.get(k, 0)) / _CLK_TCK / (b - a) for k in last}
        figures["latency"] = statistics.median(latencies[a:b])
        out.append(figures)
    return out


def _window(text: str) -> tuple[int, int]:
    a, _, b = text.partition(":")
    return int(a), int(b)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.prompt_cpu")
    p.add_argument("--prompts", type=int, default=100)
    p.add_argument("--old", help="another build's pi-actors executable (alternate with it)")
    p.add_argument("--pi", action="store_true", help="alternate with pi instead (PI_PEER_CLI or the cache folder)")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--window", action="append", type=_window,
                   help="prompts A:B (1-based; repeatable; default 20:60 and, with 120+ prompts, N-60:N-20)")
    args = p.parse_args(argv)
    windows = args.window or [(20, 60)] + ([(args.prompts - 60, args.prompts - 20)] if args.prompts >= 120 else [])
    if any(not 1 <= a < b <= args.prompts for a, b in windows):
        p.error(f"each window A:B needs 1 <= A < B <= {args.prompts}")
    become_subreaper()
    work = Path(tempfile.mkdtemp(prefix="pi-actors-promptcpu-"))
    server = Server(work)
    results: dict[str, list[list[dict[str, float]]]] = {}
    try:
        clis: dict[str, PiActors | Pi] = {"new": PiActors(work / "home-new", server.port)}
        if args.pi:
            found, how = find_pi()
            if found is None:
                p.error(f"pi not found ({how}): set PI_PEER_CLI or run python -m benchmarks --install-pi")
            clis["pi"] = Pi(work / "home-pi", server.port, found)
        elif args.old:
            clis["old"] = PiActors(work / "home-old", server.port, executable=args.old)
        other = next((k for k in clis if k != "new"), None)
        order = [other, "new", "new", other] if other else ["new"]
        for i in range(args.runs * len(clis)):
            which = order[i % len(order)]
            assert which is not None
            rows = run_once(clis[which], server, args.prompts, work, windows)
            results.setdefault(which, []).append(rows)
            for (a, b), r in zip(windows, rows, strict=True):
                print(f"{which:4} prompts {a}-{b}: " + "  ".join(f"{k} {v * 1000:.2f}" for k, v in sorted(r.items())),
                      "(ms per prompt)", flush=True)
    finally:
        server.close()
        shutil.rmtree(work, ignore_errors=True)
    for n, (a, b) in enumerate(windows):
        keys = sorted({k for runs in results.values() for rows in runs for k in rows[n]})
        print(f"median ms per prompt, prompts {a}-{b}:" + "".join(f"{w:>10}" for w in results))
        for k in keys:
            print(f"  {k:<14}" + "".join(f"{statistics.median(rows[n].get(k, 0.0) for rows in runs) * 1000:>10.2f}"
                                         for runs in results.values()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
