"""Per-turn overhead of durable session writes: a 50-turn session, with and without a file.

``python -m benchmarks.session_overhead [--turns 50] [--rounds 5]``

Each round runs the same scripted session twice with the real ``pi-actors`` CLI against the
benchmark server (``benchmarks.server``): once writing its session file (every entry written
and fsynced before the store acknowledges it, and the next request waits for that), once with
``--no-session`` — alternating which goes first. A turn is one LLM request answered with one
``echo i`` bash call; the figures are the median wall time per turn of each variant, and
their difference: what durability costs a turn. Sessions go to a fresh directory per run on
the same filesystem as the working directory.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import uuid
from pathlib import Path

from . import scenarios as S
from .clis import PiActors
from .e2e import Server
from .procs import measure


def _run(cli: PiActors, server: Server, work: Path, turns: int, durable: bool) -> tuple[float, int]:
    run_id = f"so{uuid.uuid4().hex[:10]}"
    name = f"turns-{turns}"
    session_dir = str(Path(tempfile.mkdtemp(prefix="sessions-", dir=work))) if durable else None
    m = measure(
        cli.argv(S.prompt_for(name, run_id), session_dir=session_dir),
        env=cli.env(),
        cwd=str(work),
        timeout=600,
        keep={server.proc.pid},
    )
    ok = m.returncode == 0 and S.expected_output(name) in m.stdout.decode(errors="replace")
    if not ok:
        raise RuntimeError(f"run failed (exit {m.returncode}): {(m.stderr or m.stdout).decode(errors='replace')[-300:]}")
    if durable:
        lines = sum(len(p.read_text().splitlines()) for p in Path(session_dir).glob("*.jsonl"))
    else:
        lines = 0
    return m.wall, lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.session_overhead", description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="pi-actors-bench-") as tmp:
        workdir = Path(tmp)
        server = Server(workdir)
        try:
            cli = PiActors(workdir / "home", server.port)
            work = workdir / "work"
            work.mkdir()
            _run(cli, server, work, 2, True)  # warm-up: imports, page cache
            durable: list[float] = []
            memory: list[float] = []
            lines = 0
            for round_ in range(args.rounds):
                order = (True, False) if round_ % 2 == 0 else (False, True)
                for is_durable in order:
                    wall, n = _run(cli, server, work, args.turns, is_durable)
                    (durable if is_durable else memory).append(wall)
                    lines = max(lines, n)
                print(f"round {round_ + 1}: durable {durable[-1]:.3f} s, --no-session {memory[-1]:.3f} s", flush=True)
        finally:
            server.close()
    per_turn_d = statistics.median(durable) / args.turns
    per_turn_m = statistics.median(memory) / args.turns
    print()
    print(f"{args.turns} turns, {args.rounds} rounds, medians ({lines} session lines written per durable run):")
    print(f"  durable session writes : {per_turn_d * 1000:8.2f} ms per turn  ({statistics.median(durable):.3f} s per run)")
    print(f"  --no-session (baseline): {per_turn_m * 1000:8.2f} ms per turn  ({statistics.median(memory):.3f} s per run)")
    print(f"  cost of durability     : {(per_turn_d - per_turn_m) * 1000:8.2f} ms per turn  (ratio {per_turn_d / per_turn_m:.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
