"""Scenario (g): many prompts in one session over pi's JSON-lines RPC mode (``--mode rpc``).

:func:`conversation` returns the ``interact`` callable that :func:`benchmarks.procs.measure`
runs against the CLI: it writes prompt after prompt on the CLI's stdin (``{"id", "type":
"prompt", "message"}``, the same line for both CLIs) and reads its stdout. A prompt's
**latency** runs from just before its command line is written to the moment the ``agent_end``
event of its run has been read. After each ``agent_end`` — between prompts, outside the
latency — it samples the resident set (``VmRSS``) of the process that holds the session (for
pi-actors the coordinator actor, for pi its one node process; ``holder`` finds it in the
tree) and the size of the session file(s). After the last prompt it closes stdin: both CLIs
then finish and exit.

:func:`figures` turns one run's samples into the scenario's figures: the median latency of a
window around prompt 10 (prompts 6-14) and around prompt N-10 (N-14 ... N-6: 286-294 for 300
prompts), and, between prompt 20 and prompt N, the holder's RSS growth per prompt next to the
bytes each prompt added to the session file.

A run fails (its ``problem`` is set, and the measurement does not count) when a prompt is
refused, an ``agent_end`` does not come within ``prompt_timeout`` seconds or lacks the
scripted final text (:func:`benchmarks.scenarios.prompt_done`), or the holder cannot be found
or changes between samples (a restarted coordinator).
"""

from __future__ import annotations

import json
import queue
import statistics
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import scenarios as S
from .procs import proc_rss_kb

__all__ = ["conversation", "figures", "EARLY", "LATE_FROM_END", "RSS_FROM"]

#: prompts (1-based, inclusive) whose median latency stands for "prompt 10"
EARLY = (6, 14)
#: the late window, counted back from the last prompt N: N-14 ... N-6 (286-294 for 300)
LATE_FROM_END = (14, 6)
#: RSS and session-file growth are taken from after this prompt to after the last
RSS_FROM = 20


def _session_bytes(session_dir: Path) -> int:
    return sum(p.stat().st_size for p in session_dir.rglob("*.jsonl"))


def _reader(stdout: Any, out: queue.Queue) -> None:
    """Forward ``agent_end`` events and failed responses (time read, line) until EOF."""
    for line in iter(stdout.readline, b""):
        head = line[:120]
        if b'"type":"agent_end"' in head:
            out.put((time.perf_counter(), line))
        elif b'"type":"response"' in head and b'"success":false' in line:
            out.put((time.perf_counter(), line))
    out.put((time.perf_counter(), b""))


def conversation(
    scenario: str,
    run_id: str,
    session_dir: Path,
    holder: Callable[[int], int | None],
    prompt_timeout: float = 60.0,
) -> Callable[[subprocess.Popen], dict]:
    """The ``interact`` callable for one run of ``prompts-N`` (see the module docstring).

    ``holder(root_pid)`` returns the pid of the process holding the session, or None. The
    returned dict holds ``latencies`` (seconds, one per prompt answered), ``rss_kb`` and
    ``session_bytes`` (one per prompt, after its ``agent_end``), ``holder`` (its pid) and, if
    the run went wrong, ``problem`` (one line).
    """
    n = int(scenario.rsplit("-", 1)[1])

    def talk(proc: subprocess.Popen) -> dict:
        assert proc.stdin is not None and proc.stdout is not None
        events: queue.Queue = queue.Queue()
        reader = threading.Thread(target=_reader, args=(proc.stdout, events), daemon=True)
        reader.start()
        latencies: list[float] = []
        rss: list[int] = []
        sizes: list[int] = []
        pid: int | None = None
        problem: str | None = None
        for i in range(1, n + 1):
            text = S.prompt_for(scenario, run_id) if i == 1 else S.next_prompt(i)
            line = json.dumps({"id": f"p{i}", "type": "prompt", "message": text}).encode() + b"\n"
            start = time.perf_counter()
            try:
                proc.stdin.write(line)
                proc.stdin.flush()
            except BrokenPipeError:
                problem = f"prompt {i}: the CLI closed its stdin"
                break
            try:
                when, event = events.get(timeout=prompt_timeout)
            except queue.Empty:
                problem = f"prompt {i}: no agent_end within {prompt_timeout:g} s"
                break
            if not event:
                problem = f"prompt {i}: the CLI closed its stdout (exit status {proc.poll()})"
                break
            if b'"type":"response"' in event[:120]:
                problem = f"prompt {i} refused: {event.decode(errors='replace').strip()[:200]}"
                break
            if S.prompt_done(i).encode() not in event:
                problem = f"prompt {i}: agent_end without {S.prompt_done(i)!r}: {event.decode(errors='replace')[-200:]!r}"
                break
            latencies.append(when - start)
            now = holder(proc.pid)
            if now is None or (pid is not None and now != pid):
                problem = f"prompt {i}: the session's process {'is gone' if now is None else f'changed from {pid} to {now}'}"
                break
            pid = now
            rss.append(proc_rss_kb(pid))
            sizes.append(_session_bytes(session_dir))
        proc.stdin.close()
        out: dict[str, Any] = {"latencies": latencies, "rss_kb": rss, "session_bytes": sizes, "holder": pid}
        if problem is not None:
            out["problem"] = problem
        return out

    return talk


def figures(latencies: list[float], rss_kb: list[int], session_bytes: list[int]) -> dict[str, float]:
    """One run's figures (see the module docstring); {} for runs shorter than 30 prompts.

    ``prompt_early`` / ``prompt_late``: median latency (s) of the two windows;
    ``rss_growth_per_prompt`` / ``session_bytes_per_prompt``: bytes per prompt from prompt
    :data:`RSS_FROM` to the last; ``rss_from_kb`` / ``rss_last_kb``: the two samples.
    """
    n = len(latencies)
    if n < 30 or len(rss_kb) != n or len(session_bytes) != n:
        return {}
    early = latencies[EARLY[0] - 1 : EARLY[1]]
    late = latencies[n - LATE_FROM_END[0] - 1 : n - LATE_FROM_END[1]]
    span = n - RSS_FROM
    return {
        "prompt_early": statistics.median(early),
        "prompt_late": statistics.median(late),
        "rss_from_kb": float(rss_kb[RSS_FROM - 1]),
        "rss_last_kb": float(rss_kb[-1]),
        "rss_growth_per_prompt": (rss_kb[-1] - rss_kb[RSS_FROM - 1]) * 1024 / span,
        "session_bytes_per_prompt": (session_bytes[-1] - session_bytes[RSS_FROM - 1]) / span,
    }
