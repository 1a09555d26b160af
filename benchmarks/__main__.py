"""``python -m benchmarks``: the side-by-side scenarios, the budgets, the micro-benchmarks and
the tool-dispatch figures (these two beside the last run's, see :mod:`benchmarks.previous`).

Run from the repository root with the project's virtualenv::

    .venv/bin/python -m benchmarks                 # everything, 7 rounds (~5-6 minutes on 2 quiet CPUs)
    .venv/bin/python -m benchmarks --quick         # 2 rounds, short micro-benchmarks (~2-3 minutes)
    .venv/bin/python -m benchmarks --install-pi    # npm install pi into the cache folder first
    .venv/bin/python -m benchmarks --only micro    # micro-benchmarks only
    .venv/bin/python -m benchmarks --only web      # the web page beside the terminal client (Chromium)
    .venv/bin/python -m benchmarks --scenarios a,b32 --rounds 3
    .venv/bin/python -m benchmarks --scenarios f,g --rounds 1   # the long sessions (issue 15)

``--results benchmarks/RESULTS.md`` rewrites that file with this run's figures, the machine
and the command (keeping its "## Notes" section).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shlex
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

from . import report
from .clis import find_pi, install_pi
from .e2e import default_scenarios, run_scenarios
from .micro import run_micro
from .previous import Previous, PreviousError, load_previous


def machine() -> dict[str, str]:
    info = {"nproc": str(os.cpu_count())}
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout
        info["cpu"] = next((ln.split(":", 1)[1].strip() for ln in out.splitlines() if ln.startswith("Model name")), "?")
    except (OSError, subprocess.SubprocessError):
        info["cpu"] = platform.processor() or "?"
    try:
        with open("/proc/meminfo") as f:
            kb = int(f.readline().split()[1])
        info["memory"] = f"{kb / 1024 / 1024:.1f} GiB"
    except OSError:
        info["memory"] = "?"
    info["python"] = platform.python_version()
    info["kernel"] = platform.release()
    try:
        info["node"] = subprocess.run(["node", "--version"], capture_output=True, text=True, timeout=10).stdout.strip()
    except OSError:
        info["node"] = "absent"
    info["date"] = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    try:
        info["commit"] = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                        cwd=Path(__file__).parent, timeout=10).stdout.strip()
    except OSError:
        info["commit"] = "?"
    try:
        # The working tree may be shared with engineers whose changes are not committed yet:
        # what runs is the working tree, so say how it differs from the commit.
        status = subprocess.run(["git", "status", "--porcelain", "--", "pi_actors"], capture_output=True, text=True,
                                cwd=Path(__file__).parent.parent, timeout=10).stdout.split("\n")
        info["dirty"] = ", ".join(line[3:] for line in status if line.strip()) or "none"
    except OSError:
        info["dirty"] = "?"
    return info


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks", description="pi-actors benchmarks: side by side with pi, and the runtime's micro-benchmarks")
    p.add_argument("--quick", action="store_true", help="2 rounds and short micro-benchmarks")
    p.add_argument("--rounds", type=int, help="rounds per scenario and CLI (default 7, --quick 2)")
    p.add_argument("--only", choices=["scenarios", "micro", "web"], help="run only one part")
    p.add_argument("--scenarios", help="comma-separated keys among a,b8,b32,c,d,e,f,g (default: all)")
    p.add_argument("--deltas", type=int, default=50_000, help="deltas in scenario d (default 50000)")
    p.add_argument("--turns", type=int, default=50, help="turns in scenario c (default 50)")
    p.add_argument("--long-turns", type=int, default=300, help="turns in scenario f (default 300)")
    p.add_argument("--prompts", type=int, default=300, help="rpc prompts in scenario g (default 300)")
    p.add_argument("--long-rounds", type=int, default=3,
                   help="rounds of the long scenarios f and g, at most --rounds (default 3)")
    p.add_argument("--no-pi", action="store_true", help="run pi-actors alone")
    p.add_argument("--install-pi", action="store_true", help="npm install pi into the cache folder if it is missing")
    p.add_argument("--poll", type=float, default=0.05, help="seconds between /proc samples of the tree's RSS")
    p.add_argument("--max-other", type=float, default=0.3,
                   help="repeat a run during which other processes kept more than this many CPUs busy (default 0.3)")
    p.add_argument("--retries", type=int, default=3, help="how often a disturbed run is repeated (default 3)")
    p.add_argument("--json", help="also write every figure to this JSON file")
    p.add_argument("--results", help="write a Markdown report to this file (e.g. benchmarks/RESULTS.md)")
    p.add_argument("--previous",
                   help="the last run, whose micro-benchmark and tool-dispatch figures are shown beside this run's:"
                        " a RESULTS.md or a --json file (default: benchmarks/RESULTS.md, read before --results rewrites it)")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    command = "python -m benchmarks " + " ".join(shlex.quote(a) for a in (sys.argv[1:] if argv is None else argv))
    rounds = args.rounds or (2 if args.quick else 7)
    # Read before anything runs: --results may rewrite the very file.
    try:
        previous = last_run(args.previous)
    except PreviousError as exc:
        print(f"--previous: {exc}", file=sys.stderr)
        return 2
    scen = None
    if args.only in (None, "scenarios"):
        scen = chosen_scenarios(args)
        if scen is None:
            return 2
    info = machine()
    print(f"machine: {info['nproc']} CPUs ({info['cpu']}), {info['memory']}, Python {info['python']}, node {info['node']}, {info['date']}")
    print(f"code: commit {info['commit']}; uncommitted changes under pi_actors/: {info['dirty']}")
    pi_path, pi_reason = locate_pi(args)

    results, facts = [], {}
    if scen is not None:
        results, facts, pi_reason = scenario_part(args, scen, rounds, pi_path, pi_reason)
    micro: list = []
    dispatch: list = []
    if args.only in (None, "micro"):
        micro, dispatch = micro_part(args, previous)
    if args.only in (None, "web"):
        from .web import run as run_web

        print("\n== the web client beside the terminal client (benchmarks.web) ==")
        run_web(deltas=args.deltas, rounds=min(rounds, 3))

    if args.json:
        doc = {
            "command": command, "machine": info, "facts": facts, "pi_reason": pi_reason,
            "scenarios": [
                {"key": r.scenario.key, "name": r.scenario.name, "title": r.scenario.title,
                 "runs": {cli: [{k: v for k, v in asdict(m).items() if k not in ("stdout", "stderr")} for m in ms] for cli, ms in r.runs.items()},
                 "failures": r.failures}
                for r in results
            ],
            "micro": [asdict(m) for m in micro],
            "dispatch_rows": dispatch,
        }
        Path(args.json).write_text(json.dumps(doc, indent=1, default=lambda o: None if isinstance(o, bytes) else str(o)))
    if args.results:
        write_results(Path(args.results), command, info, facts, pi_reason, rounds, results, micro, args.max_other,
                      args.long_rounds, dispatch, previous)
        print(f"\nwrote {args.results}")
    return 0


def last_run(path: str | None) -> Previous | None:
    """The last run's figures: ``path`` if given (an error if unreadable), else
    benchmarks/RESULTS.md if it exists, else None."""
    if path:
        return load_previous(path)
    default = Path(__file__).parent / "RESULTS.md"
    return load_previous(default) if default.exists() else None


def chosen_scenarios(args: argparse.Namespace) -> list | None:
    """The scenarios ``--scenarios`` asks for (all by default); None after naming an unknown key."""
    scen = default_scenarios(deltas=args.deltas, turns=args.turns, long_turns=args.long_turns, prompts=args.prompts)
    if args.scenarios:
        keys = {k.strip() for k in args.scenarios.split(",")}
        unknown = keys - {s.key for s in scen}
        if unknown:
            print(f"unknown scenario key(s): {', '.join(sorted(unknown))} (known: {','.join(s.key for s in scen)})", file=sys.stderr)
            return None
        scen = [s for s in scen if s.key in keys]
    return scen


def locate_pi(args: argparse.Namespace) -> tuple[str | None, str | None]:
    """``(pi's path, None)`` or ``(None, why pi is not measured)``."""
    if args.no_pi:
        return None, "--no-pi"
    pi_path, how = find_pi()
    if pi_path is None and args.install_pi:
        print("pi: " + install_pi())
        pi_path, how = find_pi()
    if pi_path is None:
        print(f"pi: MISSING — {how}. Running pi-actors alone.")
        return None, how
    print(f"pi: {pi_path} ({how})")
    return pi_path, None


def scenario_part(args: argparse.Namespace, scen: list, rounds: int, pi_path: str | None, pi_reason: str | None):
    """Run the scenarios and print their tables and the budgets; returns results, facts, pi_reason."""
    print(f"\n== scenarios: {rounds} round(s) ({min(rounds, args.long_rounds)} of f and g), CLIs alternating ==")
    results, facts = run_scenarios(scen, rounds=rounds, pi_path=pi_path, poll=args.poll,
                                   max_other=args.max_other, retries=args.retries, long_rounds=args.long_rounds)
    if facts.get("pi_missing"):
        pi_reason = facts["pi_missing"]
    print(f"\npi-actors: {facts.get('pi-actors')}; pi: {facts.get('pi', 'absent')}; {facts.get('sandbox')}")
    print(f"scripted server: {facts.get('requests')} requests in all, every counted run checked against its expected count")
    print(load_line(facts, args.max_other))
    print(reparented_line(facts))
    print()
    print(report.scenario_table(results, rounds))
    print("\nwhere the time goes, by the scripted server's clock (medians):")
    print(report.split_table(results))
    long = report.long_table(results)
    if long:
        print("\nlong sessions (medians over runs):")
        print(long)
        for line in report.curve_lines(results):
            print("  " + line)
    for res in results:
        for cli, problems in res.failures.items():
            for pr in sorted(set(problems)):
                print(f"  FAILED ({res.scenario.key}) {cli}: {pr}")
    print("\n== budgets (issue 15) ==")
    print(report.budget_lines(report.budgets(results, pi_reason)))
    return results, facts, pi_reason


def micro_part(args: argparse.Namespace, previous: Previous | None) -> tuple[list, list]:
    """Run and print the micro-benchmarks and the tool-dispatch figures, beside the last run's."""
    import trio

    from .tool_dispatch import figure_rows, measure_dispatch

    print("\n== micro-benchmarks (pi_actors.runtime) ==")
    micro = run_micro(quick=args.quick)
    print(report.micro_table(micro, previous=previous))
    print()
    for line in report.landscape_lines(micro):
        print("  " + line)
    print("\n== tool dispatch (benchmarks.tool_dispatch) ==")
    rounds, cold = (100, 3) if args.quick else (300, 8)
    figures = trio.run(measure_dispatch, rounds, cold, lambda line: print("  " + line))
    dispatch = figure_rows(figures)
    print(report.dispatch_table(dispatch, previous=previous))
    if previous is None:
        print("  (no last run to compare with: benchmarks/RESULTS.md is missing and no --previous was given)")
    return micro, dispatch


def reparented_line(facts: dict) -> str:
    notes = facts.get("reparented") or {}
    if not notes:
        return "no descendant was re-parented: every process was reaped by its own parent"
    parts = [f"{cli}: {n['processes']} process(es) in {n['runs']} run(s) ({', '.join(sorted(n['names']))})" for cli, n in notes.items()]
    return ("re-parented to the runner (exited, or exited within 2 s, after their parent, which had not reaped them): "
            + "; ".join(parts))


def load_line(facts: dict, max_other: float) -> str:
    loads = sorted(facts.get("other_cpus") or [0.0])
    return (f"other processes during the counted runs: median {loads[len(loads) // 2]:.2f} CPUs busy, max {loads[-1]:.2f};"
            f" {facts.get('repeated', 0)} run(s) repeated for being above {max_other:.2f}")


def write_results(path: Path, command, info, facts, pi_reason, rounds, results, micro, max_other, long_rounds=3,
                  dispatch=(), previous: Previous | None = None) -> None:
    notes = ""
    if path.exists():
        old = path.read_text()
        if "\n## Notes" in old:
            notes = old[old.index("\n## Notes") :]
    lines = [
        "# Benchmark results",
        "",
        "Written by `python -m benchmarks --results benchmarks/RESULTS.md`; see `benchmarks/README.md` for what",
        "each figure means and how it is taken.",
        "",
        f"- date: {info['date']}; code: commit {info['commit']}, uncommitted changes under `pi_actors/` at the time: {info['dirty']}",
        f"- machine: {info['nproc']} CPUs, {info['cpu']}, {info['memory']} RAM, Linux {info['kernel']}",
        f"- Python {info['python']}, node {info['node']}",
        f"- command: `{command}` (from the repository root, with `.venv/bin/python`)",
    ]
    if facts:
        lines.append(f"- pi-actors {facts.get('pi-actors', '?')}, pi {facts.get('pi', 'absent' if pi_reason is None else f'absent: {pi_reason}')};"
                     f" {facts.get('sandbox', '')}")
        lines.append(f"- {rounds} round(s) per scenario and CLI ({min(rounds, long_rounds)} of the long scenarios f and g), alternating,"
                     f" after one warm-up run each; scenario runs took {facts.get('elapsed', 0):.0f} s")
        lines.append(f"- {load_line(facts, max_other)}")
        lines.append(f"- {reparented_line(facts)}")
    if results:
        lines += ["", "## Scenarios (medians)", "", report.scenario_table(results, rounds, markdown=True), ""]
        lines += ["Where the time goes, by the scripted server's clock (medians):", "", report.split_table(results, markdown=True), ""]
        long = report.long_table(results, markdown=True)
        if long:
            lines += ["Long sessions (medians over runs; late ÷ early is taken within each run, then the median over runs):", "", long, ""]
            lines += [f"- {line}" for line in report.curve_lines(results)] + [""]
        fails = [f"- ({r.scenario.key}) {cli}: {p}" for r in results for cli, ps in r.failures.items() for p in sorted(set(ps))]
        if fails:
            lines += ["Failed runs (not in the medians):", "", *fails, ""]
        lines += ["## Budgets (issue 15)", "", report.budget_lines(report.budgets(results, pi_reason), markdown=True), ""]
    if micro:
        lines += ["## Micro-benchmarks", "", report.micro_table(micro, markdown=True, previous=previous), ""]
        lines += [f"- {ln}" for ln in report.landscape_lines(micro)]
        lines.append("")
    if dispatch:
        lines += ["## Tool dispatch", "", "`python -m benchmarks.tool_dispatch`'s figures (see its docstring); the tool's own"
                  " time (`ls` of an empty directory, in-process) is subtracted.", "",
                  report.dispatch_table(list(dispatch), markdown=True, previous=previous), ""]
    path.write_text("\n".join(lines) + notes)


if __name__ == "__main__":
    sys.exit(main())
