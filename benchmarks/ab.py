"""Two builds of pi-actors, run alternately on one scenario: ``python -m benchmarks.ab``.

    .venv/bin/python -m benchmarks.ab turns-50 --old /path/to/old/venv/bin/pi-actors [--runs 6]

For a machine shared with other jobs: a change is judged by runs of the old and the new build
taken in turn (old, new, new, old, ...), against one scripted server, so that load which comes
and goes falls on both. Per run it prints wall, the whole tree's CPU (user + system, from
``wait4``), the time to the first request, and for multi-turn scenarios the median client time per turn by the server's clock
(as ``python -m benchmarks``), the first turn on its own (first request to second: it waits
for the tool pool's zygote when the start-up was quick), the requests' span per turn (budget
(c)'s figure) and the time from the last request to the exit (the whole reply's handling in
(d)); for ``bulkturns-N``, the median client time of its first 10 turns and of its last 11
and their ratio ((f growth), within the run); then the medians per build. The new build is the ``pi-actors`` next to this
interpreter. ``--old`` must be the executable of another installation (a copy of the
virtualenv whose editable install points at the old tree).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

from . import scenarios as S
from .clis import PiActors
from .e2e import Scenario, Server, _run_one


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.ab")
    p.add_argument("scenario", help="e.g. trivial, parallel-32, turns-50, deltas-50000, bulkturns-300, prompts-150 (rpc)")
    p.add_argument("--old", required=True, help="the old build's pi-actors executable")
    p.add_argument("--runs", type=int, default=6, help="runs per build (default 6)")
    args = p.parse_args(argv)
    from .procs import become_subreaper

    become_subreaper()
    work = Path(tempfile.mkdtemp(prefix="pi-actors-ab-"))
    server = Server(work)
    name = args.scenario
    rpc = name.startswith("prompts")
    scenario = Scenario("ab", name, name, sessions=name.startswith(("turns", "bulkturns", "prompts")), timeout=600, rpc=rpc)
    figures: dict[str, list[tuple[float, float, float | None, float, float | None, float | None, float | None, float]]] = {
        "old": [], "new": []}
    memory: dict[str, list[tuple[float, float]]] = {"old": [], "new": []}  # (g): RSS growth, file bytes per prompt
    try:
        clis = {"old": PiActors(work / "home-old", server.port, executable=args.old),
                "new": PiActors(work / "home-new", server.port)}
        order = ["old", "new", "new", "old"]
        for i in range(2 * args.runs):
            which = order[i % 4]
            m, problem = _run_one(clis[which], scenario, server, work, 0.05)
            cpu = m.cpu
            turn = m.extra.get("client_per_turn")
            tail = m.extra.get("after_last_request", 0.0)
            head = m.extra.get("to_first_request", 0.0)
            grow, size = m.extra.get("rss_growth_per_prompt"), m.extra.get("session_bytes_per_prompt")
            # (c)'s budget figure: the requests' span per turn, and its first turn on its own.
            first = m.extra.get("first_to_second_request")
            # (f growth): the last turns against the first ones, within this run.
            early, late = m.extra.get("turns_early"), m.extra.get("turns_late")
            growth = late / early if early and late else None
            requests = S.expected_requests(name)
            span = m.extra.get("request_span")
            per_turn = span / (requests - 1) if span is not None and requests > 1 else None
            print(f"{which}: wall {m.wall:.3f} s  cpu {cpu:.3f} s  first request {head:.3f} s  last request -> exit {tail:.3f} s  client/turn "
                  f"{'-' if turn is None else f'{turn * 1000:.1f} ms'}"
                  + ("" if grow is None or size is None else
                     f"  holder RSS +{grow:,.0f} B/prompt, file +{size:,.0f} B/prompt ({grow / size:.2f}x)")
                  + ("" if first is None or per_turn is None else
                     f"  1st -> 2nd request {first * 1000:.1f} ms  span/turn {per_turn * 1000:.1f} ms")
                  + ("" if growth is None else
                     f"  turns 1-10 {early * 1000:.1f} ms, last 11 {late * 1000:.1f} ms ({growth:.2f}x)")
                  + f"  {problem or 'ok'}", flush=True)
            if problem is None:
                figures[which].append((m.wall, cpu, turn, tail, first, per_turn, growth, head))
                if grow is not None and size is not None:
                    memory[which].append((grow, size))
    finally:
        server.close()
        shutil.rmtree(work, ignore_errors=True)
    for which, rows in figures.items():
        if not rows:
            continue
        turns = [r[2] for r in rows if r[2] is not None]
        firsts = [r[4] for r in rows if r[4] is not None]
        spans = [r[5] for r in rows if r[5] is not None]
        growths = [r[6] for r in rows if r[6] is not None]
        print(f"{which} median of {len(rows)}: wall {statistics.median(r[0] for r in rows):.3f} s, "
              f"cpu {statistics.median(r[1] for r in rows):.3f} s, "
              f"first request {statistics.median(r[7] for r in rows):.3f} s, "
              f"last request -> exit {statistics.median(r[3] for r in rows):.3f} s"
              + (f", client/turn {statistics.median(turns) * 1000:.1f} ms" if turns else "")
              + (f", 1st -> 2nd request {statistics.median(firsts) * 1000:.1f} ms (max {max(firsts) * 1000:.1f})"
                 f", span/turn {statistics.median(spans) * 1000:.1f} ms" if firsts and spans else "")
              + (f", holder RSS +{statistics.median(g for g, _ in memory[which]):,.0f} B/prompt, file "
                 f"+{statistics.median(f for _, f in memory[which]):,.0f} B/prompt, growth / file "
                 f"{statistics.median(g / f for g, f in memory[which]):.2f}x" if memory[which] else "")
              + (f", last turns / first turns {statistics.median(growths):.2f}x" if growths else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
