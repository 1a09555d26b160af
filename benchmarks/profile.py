"""Profile one pi-actors run of a scenario, every process of it: ``python -m benchmarks.profile``.

    .venv/bin/python -m benchmarks.profile turns-50 [--top 25] [--out DIR]

Starts the benchmark's scripted server, runs ``pi-actors -p`` once for the scenario with
``cProfile`` switched on in the CLI and in every actor (coordinator, provider, tool pool, and
the session store when it runs apart), and prints, per process, its total profiled time and
its top functions by cumulative and by own time. The ``.prof`` files stay in ``--out`` for
``snakeviz`` or ``pstats``. The sandboxed tool workers are not profiled (``py-spy``,
``benchmarks.spy``, sees them).

How: the CLI, through a ``sitecustomize`` module on ``PYTHONPATH`` that starts a profiler at
interpreter start when ``PI_BENCH_PROFILE_DIR`` is set and writes ``<dir>/<pid>-cli.prof`` at
exit (also on SIGTERM); the actors, which start with ``python -I`` and so ignore
``PYTHONPATH``, through ``PI_ACTORS_PROFILE_DIR`` (``pi_actors.runtime.child``: the event
loop's thread, timed by its CPU time, written as ``<dir>/<pid>-<actor>.prof``). Profiling
slows Python code down (roughly 1.5-3x), so read shares, not absolute times.
"""

from __future__ import annotations

import argparse
import glob
import io
import os
import pstats
import shutil
import sys
import tempfile
import uuid
from pathlib import Path

from . import scenarios as S
from .clis import PiActors
from .e2e import Server
from .procs import become_subreaper, measure

_SITECUSTOMIZE = '''
import os
_dir = os.environ.get("PI_BENCH_PROFILE_DIR")
if _dir:
    import atexit, cProfile, signal, sys
    import time
    _prof = cProfile.Profile(time.process_time)
    def _dump(*_):
        _prof.disable()
        name = os.path.basename(sys.argv[0] or "python")
        if len(sys.argv) > 1 and "pi_actors.runtime.child" in " ".join(sys.orig_argv):
            name = sys.argv[-1]
        elif "pi-actors" in sys.argv[0]:
            name = "cli"
        _prof.dump_stats(os.path.join(_dir, f"{os.getpid()}-{name}.prof"))
    def _on_term(signum, frame):
        _dump()
        os._exit(128 + signum)
    atexit.register(_dump)
    signal.signal(signal.SIGTERM, _on_term)
    _prof.enable()
'''


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.profile")
    p.add_argument("scenario", help="trivial, parallel-N, turns-N or deltas-N")
    p.add_argument("--top", type=int, default=20)
    p.add_argument("--out", help="keep the .prof files here (default: a temporary folder, printed)")
    p.add_argument("--sort", default="tottime", help="second listing's sort key (default tottime)")
    args = p.parse_args(argv)

    become_subreaper()
    work = Path(tempfile.mkdtemp(prefix="pi-actors-profile-"))
    out = Path(args.out) if args.out else work / "prof"
    out.mkdir(parents=True, exist_ok=True)
    site = work / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(_SITECUSTOMIZE)
    server = Server(work)
    try:
        cli = PiActors(work / "home", server.port)
        env = cli.env()
        env["PYTHONPATH"] = str(site) + os.pathsep + env.get("PYTHONPATH", "")
        env["PI_BENCH_PROFILE_DIR"] = str(out)
        env["PI_ACTORS_PROFILE_DIR"] = str(out)
        run_id = "profile" + uuid.uuid4().hex[:8]
        sessions = str(work / "sessions") if args.scenario.startswith("turns") else None
        cwd = work / "cwd"
        cwd.mkdir()
        m = measure(cli.argv(S.prompt_for(args.scenario, run_id), session_dir=sessions), env=env, cwd=str(cwd), timeout=300,
                    keep={server.proc.pid})
        print(f"pi-actors {args.scenario}: exit {m.returncode}, {m.wall:.3f} s wall, {m.cpu:.3f} s CPU (under the profiler);"
              f" {server.requests_for(run_id)} requests")
        if m.returncode != 0:
            print(m.stderr.decode(errors="replace")[-2000:])
    finally:
        server.close()
    files = sorted(glob.glob(str(out / "*.prof")))
    summary = []
    for f in files:
        st = pstats.Stats(f)
        summary.append((st.total_tt, f))
    summary.sort(reverse=True)
    print("\nprocesses by profiled time:")
    for tt, f in summary:
        print(f"  {tt:8.3f} s  {os.path.basename(f)}")
    for tt, f in summary:
        if tt < 0.05:
            continue
        for key in ("cumulative", args.sort):
            buf = io.StringIO()
            st = pstats.Stats(f, stream=buf)
            st.strip_dirs().sort_stats(key).print_stats(args.top)
            text = buf.getvalue()
            body = text[text.find("   ncalls") :]
            print(f"\n==== {os.path.basename(f)}: {tt:.3f} s, top {args.top} by {key} ====")
            print(body.rstrip())
    print(f"\nprofiles: {out}")
    if not args.out:
        shutil.rmtree(work / "home", ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
