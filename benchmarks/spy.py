"""Sample every process of one pi-actors run with py-spy: ``python -m benchmarks.spy``.

    .venv/bin/python -m benchmarks.spy turns-50 [--rate 250] [--out FILE] [--top 25]

Starts the benchmark's scripted server, runs ``pi-actors -p`` once for the scenario under
``py-spy record --subprocesses --format raw`` (on-CPU samples only, so other load on the
machine does not add samples), and prints, per process (by its command line), the sample
count and the functions with the most own and inclusive samples. Unlike
``benchmarks.profile`` it sees the actor processes too (they start with ``python -I``, which
ignores a ``sitecustomize`` on ``PYTHONPATH``). Needs ``py-spy`` (``pip install py-spy``).
"""

from __future__ import annotations

import argparse
import collections
import re
import shutil
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

from . import scenarios as S
from .clis import PiActors
from .e2e import Server


def _process_of(frame0: str) -> str:
    m = re.match(r"process (\d+):\"(.*)\"", frame0)
    if not m:
        return frame0
    cmd = m.group(2)
    if "pi_actors.runtime.child" in cmd:
        return "actor " + cmd.split()[-1]
    if "pi-actors" in cmd:
        return "cli"
    return cmd[:60]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.spy")
    p.add_argument("scenario", help="trivial, parallel-N, turns-N or deltas-N")
    p.add_argument("--rate", type=int, default=250)
    p.add_argument("--top", type=int, default=25)
    p.add_argument("--out", help="keep the raw samples here")
    p.add_argument("--process", default="", help="only list processes whose name contains this")
    p.add_argument("--from-raw", help="only summarise this raw file of an earlier run")
    args = p.parse_args(argv)
    if args.from_raw:
        _summarise(Path(args.from_raw), args)
        return 0
    spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    work = Path(tempfile.mkdtemp(prefix="pi-actors-spy-"))
    raw = Path(args.out) if args.out else work / "raw.txt"
    server = Server(work)
    try:
        cli = PiActors(work / "home", server.port)
        run_id = "spy" + uuid.uuid4().hex[:8]
        sessions = str(work / "sessions") if args.scenario.startswith(("turns", "bulkturns")) else None
        cwd = work / "cwd"
        cwd.mkdir()
        argv_ = cli.argv(S.prompt_for(args.scenario, run_id), session_dir=sessions)
        cmd = [spy, "record", "--subprocesses", "--format", "raw", "-r", str(args.rate), "-o", str(raw), "--", *argv_]
        r = subprocess.run(cmd, env=cli.env(), cwd=str(cwd), capture_output=True, timeout=600)
        print(f"pi-actors {args.scenario}: exit {r.returncode}; {server.requests_for(run_id)} requests")
    finally:
        server.close()
    _summarise(raw, args)
    if not args.out:
        shutil.rmtree(work, ignore_errors=True)
    return 0


def _summarise(raw: Path, args: argparse.Namespace) -> None:
    own: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    incl: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    total: collections.Counter[str] = collections.Counter()
    for line in raw.read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        frames = stack.split(";")
        procs = [f for f in frames if f.startswith("process ")]
        proc = _process_of(procs[-1]) if procs else "?"
        count = int(n)
        total[proc] += count
        funcs = [re.sub(r" \(/.*/(pi_actors|site-packages|lib/python3\.\d+)/", r" (\1/", f) for f in frames[len(procs):]]
        if funcs:
            own[proc][funcs[-1]] += count
        for f in set(funcs):
            incl[proc][f] += count
    print(f"\nsamples at {args.rate}/s, on CPU only:")
    for proc, n in total.most_common():
        print(f"  {n:7d}  {proc}")
    for proc, n in total.most_common():
        if args.process not in proc or n < 20:
            continue
        print(f"\n==== {proc}: {n} samples; own ====")
        for f, c in own[proc].most_common(args.top):
            print(f"  {c:6d} {100 * c / n:5.1f}%  {f}")
        print(f"==== {proc}: inclusive ====")
        for f, c in incl[proc].most_common(args.top):
            print(f"  {c:6d} {100 * c / n:5.1f}%  {f}")


if __name__ == "__main__":
    sys.exit(main())
