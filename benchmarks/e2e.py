"""Side-by-side scenarios: pi-actors and pi against one scripted LLM server.

One ``benchmarks.server`` process serves every run. Each round runs every scenario once with
each CLI, the two CLIs alternating (which one goes first flips every round), after one
untimed warm-up run of each CLI. A run counts only if it exited 0, printed the scenario's
check string, and made exactly the expected number of requests to the server (read back
from the server's request log by the run's id) — otherwise it is reported as failed.

See :mod:`benchmarks.procs` for how wall, CPU and memory are taken,
:mod:`benchmarks.startup` for scenario (e) and :mod:`benchmarks.rpc_drive` for (g).

The long-session scenarios (f) and (g) (issue 15) take a minute or more per run: they run in
the first ``long_rounds`` rounds only (default 3).
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import rpc_drive
from . import scenarios as S
from .clis import Pi, PiActors
from .procs import Measurement, become_subreaper, measure
from .startup import measure_startup

__all__ = ["Scenario", "ScenarioResult", "default_scenarios", "run_scenarios", "Server"]


@dataclass(frozen=True)
class Scenario:
    key: str  # "a", "b8", ...
    name: str  # server scenario name, or "startup"
    title: str
    sessions: bool = False  # durable session writes (a fresh --session-dir per run)
    timeout: float = 120.0
    rpc: bool = False  # driven over --mode rpc (benchmarks.rpc_drive) instead of -p
    long: bool = False  # runs in the first ``long_rounds`` rounds only


def default_scenarios(deltas: int = 50_000, turns: int = 50, parallel: tuple[int, ...] = (8, 32),
                      long_turns: int = 300, prompts: int = 300) -> list[Scenario]:
    out = [Scenario("a", "trivial", "trivial prompt -> final text (-p)")]
    for n in parallel:
        out.append(Scenario(f"b{n}", f"parallel-{n}", f"{n} parallel `sleep 1; echo i` bash calls, then text"))
    out.append(Scenario("c", f"turns-{turns}", f"{turns} turns of one `echo i` call, session written", sessions=True))
    out.append(Scenario("d", f"deltas-{deltas}", f"one reply of {deltas:,} text deltas"))
    out.append(Scenario("e", "startup", "start-up to ready for input (interactive, on a pty)", timeout=20.0))
    out.append(Scenario("f", f"bulkturns-{long_turns}", f"{long_turns} turns of one bash call printing ~1 kB, session written",
                        sessions=True, timeout=max(120.0, long_turns * 2.0), long=True))
    out.append(Scenario("g", f"prompts-{prompts}", f"rpc mode: {prompts} prompts of one bash call each, session written",
                        sessions=True, timeout=max(120.0, prompts * 4.0), rpc=True, long=True))
    return out


@dataclass
class ScenarioResult:
    scenario: Scenario
    runs: dict[str, list[Measurement]] = field(default_factory=dict)
    failures: dict[str, list[str]] = field(default_factory=dict)

    def ok(self, cli: str) -> list[Measurement]:
        return self.runs.get(cli, [])

    def median(self, cli: str, attr: str) -> float | None:
        vals = [getattr(m, attr) for m in self.ok(cli)]
        return statistics.median(vals) if vals else None

    def median_extra(self, cli: str, key: str) -> float | None:
        vals = [m.extra[key] for m in self.ok(cli) if m.extra.get(key) is not None]
        return statistics.median(vals) if vals else None

    def median_ratio(self, cli: str, key: str, base: str) -> float | None:
        """The median over runs of ``extra[key] / extra[base]`` taken within each run: for a
        figure judged against its own run's baseline (a session's late turns against its
        early ones), since the machine's speed can move from one run to the next."""
        vals = [m.extra[key] / m.extra[base] for m in self.ok(cli) if m.extra.get(key) is not None and m.extra.get(base)]
        return statistics.median(vals) if vals else None

    def peak(self, cli: str, attr: str) -> int | None:
        vals = [getattr(m, attr) for m in self.ok(cli)]
        return max(vals) if vals else None


class Server:
    """The scripted LLM server in its own process, with its request log."""

    def __init__(self, workdir: Path) -> None:
        self.log = workdir / "requests.log"
        self.log.touch()
        env = dict(os.environ)
        root = str(Path(__file__).resolve().parent.parent)
        env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "benchmarks.server", "--log", str(self.log)],
            stdout=subprocess.PIPE,
            env=env,
            cwd=root,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line.strip().isdigit():
            self.proc.kill()
            raise RuntimeError(f"the scripted server did not start (printed {line!r})")
        self.port = int(line)

    def requests_for(self, run_id: str) -> int:
        return len(self.request_times(run_id))

    def request_times(self, run_id: str) -> list[float]:
        """Unix times at which the server received the run's requests, in order."""
        with open(self.log, encoding="utf-8") as f:
            return [float(parts[3]) for parts in (line.split() for line in f) if len(parts) == 4 and parts[0] == run_id]

    def reply_times(self, run_id: str, expect: int, wait: float = 2.0) -> list[tuple[float, float]]:
        """``(request read, reply's end)`` unix times of each of the run's replies written to
        their end, in the order the requests arrived. The server logs a reply's end just after
        its last write, so it may lag the CLI's exit: this waits up to ``wait`` seconds for
        ``expect`` of them."""
        deadline = time.monotonic() + wait
        while True:
            with open(self.log, encoding="utf-8") as f:
                rows = [(float(p[5]), float(p[3])) for p in (line.split() for line in f)
                        if len(p) == 6 and p[0] == run_id and p[4] == "replied"]
            if len(rows) >= expect or time.monotonic() > deadline:
                return sorted(rows)
            time.sleep(0.05)

    def total_requests(self) -> int:
        with open(self.log, encoding="utf-8") as f:
            return sum(1 for _ in f)

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def turn_gaps(replies: list[tuple[float, float]]) -> list[float]:
    """The client's time of each turn: from the end of a reply to the arrival of the next
    request (tool run, session writes, building and sending the request), by the server's
    clock. ``replies``: ``(request read, reply's end)`` per request, in order."""
    return [nxt[0] - cur[1] for cur, nxt in zip(replies, replies[1:], strict=False)]


def long_turn_figures(gaps: list[float]) -> dict[str, float]:
    """(f)'s figures of one run: ``turn_overhead`` (mean client time per turn, all turns),
    ``turns_early`` (median of turns 1-10) and ``turns_late`` (median of the last 11 turns:
    290-300 of 300); {} if there are fewer than 22 turns."""
    if len(gaps) < 22:
        return {}
    return {
        "turn_overhead": statistics.fmean(gaps),
        "turns_early": statistics.median(gaps[:10]),
        "turns_late": statistics.median(gaps[-11:]),
    }


def _long_note(m: Measurement) -> str:
    """The long scenarios' own figures of one run, for the progress line."""
    x = m.extra
    if "turns_early" in x:
        return (f"; per turn {x['turn_overhead'] * 1000:.1f} ms, turns 1-10 {x['turns_early'] * 1000:.1f} ms,"
                f" last 11 {x['turns_late'] * 1000:.1f} ms")
    if "prompt_early" in x:
        return (f"; prompt ~10 {x['prompt_early'] * 1000:.1f} ms, ~N-10 {x['prompt_late'] * 1000:.1f} ms,"
                f" holder RSS +{x['rss_growth_per_prompt']:,.0f} B/prompt, session +{x['session_bytes_per_prompt']:,.0f} B/prompt")
    return ""


def _check(scenario: Scenario, m: Measurement, server: Server, run_id: str) -> str | None:
    """Why the run does not count, or None."""
    if scenario.name == "startup" and m.returncode != 0:
        text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07", "", m.stdout.decode(errors="replace"))
        return f"no ready marker on the terminal within {scenario.timeout:g} s; last output: {' '.join(text.split())[-160:]!r}"
    if m.returncode != 0:
        tail = (m.stderr or m.stdout).decode(errors="replace").strip().splitlines()[-3:]
        return f"exit {m.returncode}: {' | '.join(tail)}"
    if scenario.name == "startup":
        return None
    if scenario.rpc:
        if m.extra.get("problem"):
            return m.extra["problem"]
        got, expect = server.requests_for(run_id), S.expected_requests(scenario.name)
        return None if got == expect else f"{got} requests reached the scripted server, expected {expect}"
    out = m.stdout.decode(errors="replace")
    want = S.expected_output(scenario.name)
    if want not in out:
        return f"output lacks {want[:40]!r}: {out.strip()[-120:]!r}"
    if scenario.name.startswith("deltas-"):
        n = int(scenario.name.split("-")[1])
        if out.count(S.DELTA_PIECE.strip()) != n:
            return f"output holds {out.count(S.DELTA_PIECE.strip())} of {n} deltas"
    got, expect = server.requests_for(run_id), S.expected_requests(scenario.name)
    if got != expect:
        return f"{got} requests reached the scripted server, expected {expect}"
    return None


def _run_one(cli, scenario: Scenario, server: Server, workdir: Path, poll: float) -> tuple[Measurement, str | None]:
    run_id = f"{cli.short.replace('-', '')}{uuid.uuid4().hex[:10]}"
    work = Path(tempfile.mkdtemp(prefix="work-", dir=workdir))
    session_dir = str(Path(tempfile.mkdtemp(prefix="sessions-", dir=workdir))) if scenario.sessions else None
    keep = {server.proc.pid}
    t_start = time.time()
    try:
        if scenario.name == "startup":
            m = measure_startup(
                cli.argv(None, interactive=True), env=cli.env(), cwd=str(work), ready=cli.ready_marker,
                timeout=scenario.timeout, keep=keep,
            )
        elif scenario.rpc:
            assert session_dir is not None
            talk = rpc_drive.conversation(scenario.name, run_id, Path(session_dir), cli.session_holder)
            m = measure(
                cli.argv(None, session_dir=session_dir, rpc=True),
                env=cli.env(), cwd=str(work), timeout=scenario.timeout, poll=poll, keep=keep, interact=talk,
            )
            m.extra.update(rpc_drive.figures(m.extra["latencies"], m.extra["rss_kb"], m.extra["session_bytes"]))
        else:
            m = measure(
                cli.argv(S.prompt_for(scenario.name, run_id), session_dir=session_dir),
                env=cli.env(), cwd=str(work), timeout=scenario.timeout, poll=poll, keep=keep,
            )
        problem = _check(scenario, m, server, run_id)
        times = server.request_times(run_id)
        if times:
            # Split the run by the server's clock: start-up (to the first request), the
            # requests' span, and the rest (the last reply's handling and the shutdown).
            m.extra["to_first_request"] = times[0] - t_start
            m.extra["request_span"] = times[-1] - times[0]
            m.extra["after_last_request"] = m.wall - (times[-1] - t_start)
            if len(times) > 1:
                m.extra["first_to_second_request"] = times[1] - times[0]
                gaps = turn_gaps(server.reply_times(run_id, len(times)))
                if gaps and not scenario.rpc:
                    m.extra["client_per_turn"] = statistics.median(gaps)
                if scenario.name.startswith("bulkturns-"):
                    m.extra["turn_gaps"] = gaps
                    m.extra.update(long_turn_figures(gaps))
        if problem is None and session_dir is not None and not any(Path(session_dir).rglob("*.jsonl")):
            problem = "no session file was written"
        if problem is None and m.extra.get("lingering"):
            problem = f"left {len(m.extra['lingering'])} process(es) running 2 s after exiting: {', '.join(sorted(set(m.extra['lingering'])))}"
        return m, problem
    finally:
        shutil.rmtree(work, ignore_errors=True)
        if session_dir:
            shutil.rmtree(session_dir, ignore_errors=True)


def _run_quiet(measure: Any, facts: dict, max_other: float, retries: int, say: Any) -> tuple[Any, str | None, float]:
    """One measured run, repeated (after 3, 9, 27 s) while other processes kept more than
    ``max_other`` CPUs busy, up to ``retries`` times; returns the run, its problem and the load."""
    attempt = 0
    while True:
        m, problem = measure()
        other = m.extra.get("other_cpus", 0.0)
        if problem is not None or other <= max_other or attempt == retries:
            return m, problem, other
        facts["repeated"] = facts.get("repeated", 0) + 1
        say(f"other processes kept {other:.2f} CPUs busy: run again")
        time.sleep(min(30, 3 * 3**attempt))  # 3, 9, 27 s: let the other job finish
        attempt += 1


def _say(progress: Callable[[str], object], label: str, text: str) -> None:
    progress(f"{label} {text}")


def _note_orphans(facts: dict, cli_name: str, m: Any) -> None:
    """Count the processes a run left behind (reparented to us), by name pattern."""
    if not m.orphans:
        return
    note = facts.setdefault("reparented", {}).setdefault(cli_name, {"runs": 0, "processes": 0, "names": set()})
    note["runs"] += 1
    note["processes"] += m.orphans
    note["names"].update(re.sub(r"-\d+$", "-*", n.split(" -- ")[-1].split("/")[-1]) for n in m.extra.get("orphan_names", []))


def _record(res: Any, idle: Any, cli_name: str, m: Any, problem: str | None) -> None:
    """File a run under its scenario (and its start-up-until-idle twin), or its failure."""
    if problem is not None:
        res.failures.setdefault(cli_name, []).append(problem)
        return
    res.runs.setdefault(cli_name, []).append(m)
    if idle is None:
        return
    if m.extra.get("idle") is not None:
        idle.runs.setdefault(cli_name, []).append(m.extra["idle"])
    else:
        idle.failures.setdefault(cli_name, []).append("never went idle")


def run_scenarios(
    scenarios: list[Scenario],
    *,
    rounds: int,
    pi_path: str | None,
    poll: float = 0.05,
    max_other: float = 0.3,
    retries: int = 3,
    long_rounds: int = 3,
    progress=print,
) -> tuple[list[ScenarioResult], dict]:
    """Run everything; returns the results and facts about the run (versions, server).

    The long scenarios (``Scenario.long``: f, g) run in the first ``long_rounds`` rounds only.

    The machine may be shared: a run during which other processes kept more than
    ``max_other`` CPUs busy on average is discarded and run again after a pause (3, 9, 27 s),
    up to ``retries`` times (the last attempt counts whatever the load; ``facts`` says how many
    runs were repeated and how loaded the counted ones were).
    """
    become_subreaper()
    workdir = Path(tempfile.mkdtemp(prefix="pi-actors-bench-"))
    server = Server(workdir)
    facts: dict = {"port": server.port}
    try:
        ours = PiActors(workdir / "pi-actors-home", server.port)
        clis: list[PiActors | Pi] = [ours]
        facts["pi-actors"] = ours.version()
        facts["sandbox"] = ours.sandbox_note()
        if pi_path:
            pi = Pi(workdir / "pi-home", server.port, pi_path)
            facts["pi"] = pi.version()
            clis.append(pi)
        results = [ScenarioResult(s) for s in scenarios]
        idle = {}
        for res in list(results):
            if res.scenario.name == "startup":
                derived = ScenarioResult(Scenario(res.scenario.key + " idle", "startup-idle", "start-up until the whole tree is idle"))
                idle[res.scenario.key] = derived
                results.insert(results.index(res) + 1, derived)
        # Warm-up: page cache, bytecode caches, node's compile cache. Not timed.
        warm = Scenario("warm", "trivial", "warm-up")
        for cli in clis:
            _, problem = _run_one(cli, warm, server, workdir, poll)
            progress(f"  warm-up {cli.name}: {'ok' if problem is None else problem}")
            if problem is not None and cli.name == "pi":
                facts["pi_missing"] = f"pi failed its warm-up run: {problem}"
        if "pi_missing" in facts:
            clis = clis[:1]
        t_start = time.perf_counter()
        for r in range(rounds):
            order = clis if r % 2 == 0 else list(reversed(clis))
            for res in results:
                if res.scenario.name == "startup-idle" or (res.scenario.long and r >= long_rounds):
                    continue
                for cli in order:
                    label = f"  round {r + 1}/{rounds} {res.scenario.key:<4} {cli.name:<9}"
                    measure = functools.partial(_run_one, cli, res.scenario, server, workdir, poll)
                    say = functools.partial(_say, progress, label)
                    m, problem, other = _run_quiet(measure, facts, max_other, retries, say)
                    _note_orphans(facts, cli.name, m)
                    _record(res, idle.get(res.scenario.key), cli.name, m, problem)
                    if problem is None:
                        facts.setdefault("other_cpus", []).append(other)
                    progress(
                        f"  round {r + 1}/{rounds} {res.scenario.key:<4} {cli.name:<9} "
                        + (f"{m.wall:7.3f} s wall {m.cpu:7.3f} s cpu {m.max_rss_kb / 1024:6.1f} MiB  (others: {other:.2f} CPUs){_long_note(m)}" if problem is None else f"FAILED: {problem}")
                    )
        facts["elapsed"] = time.perf_counter() - t_start
        facts["requests"] = server.total_requests()
        return results, facts
    finally:
        server.close()
        shutil.rmtree(workdir, ignore_errors=True)
