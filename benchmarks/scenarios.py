"""The benchmark scenarios: what the model answers to each request, as a pure function.

A prompt names its scenario and its run with a marker, ``pi-actors-bench scenario=NAME
run=ID``; the scripted server (``benchmarks.server``) reads the marker from the request's
first user message and answers with :func:`reply_for`. The answer depends only on the
request body, so one server serves every scenario, every round and both CLIs.

Scenarios (issues 9 and 15):

* ``trivial``      — one text reply;
* ``parallel-N``   — one turn of N parallel ``sleep 1; echo i`` bash calls, then a text
  reply naming how many tool results came back;
* ``turns-N``      — N turns of one ``echo i`` bash call each, then a text reply;
* ``deltas-N``     — one text reply streamed as N deltas;
* ``bulkturns-N``  — N turns of one bash call printing a line of 1,000 ``x`` and then ``i``
  (:data:`BULK_COMMAND`), then a text reply (a long session: ~1 kB of output per turn);
* ``prompts-N``    — for rpc mode: N prompts in one session (the first carries the marker,
  prompt ``i`` for i ≥ 2 is :func:`next_prompt`), each answered with one ``echo i`` bash call
  and then the text ``prompt i done: ok`` (:func:`prompt_done`).

The final text of every scenario ends with a check string the runner verifies, so a run
whose tools did not run (or did not all come back) is reported as failed, not timed.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import lru_cache
from typing import Any

from pi_actors.testing.wire_formats import Reply, ScriptToolCall, openai_frames

__all__ = [
    "MARKER", "BULK_COMMAND", "prompt_for", "next_prompt", "prompt_done", "parse_marker", "expected_requests",
    "expected_output", "reply_for",
]

MARKER = "pi-actors-bench"
_MARKER_RE = re.compile(MARKER + r" scenario=([a-z]+(?:-\d+)?) run=(\w+)")
#: Each delta of the ``deltas-N`` scenario carries this text.
DELTA_PIECE = "abc "
#: The bash command of turn ``i`` of ``bulkturns-N`` (the same for both CLIs): prints a line
#: of 1,000 ``x``, then the turn's index (1,003-1,005 bytes of output).
BULK_COMMAND = "head -c 1000 /dev/zero | tr '\\0' x; echo; echo {i}"
BULK_LINE = "x" * 1000


def prompt_for(scenario: str, run_id: str) -> str:
    return f"{MARKER} scenario={scenario} run={run_id}. Follow the scripted plan."


def next_prompt(i: int) -> str:
    """The text of prompt ``i`` (1-based, i ≥ 2) of a ``prompts-N`` run."""
    return f"prompt {i}: one more, please."


def prompt_done(i: int) -> str:
    """The final text of prompt ``i`` of a ``prompts-N`` run whose tool result came back right."""
    return f"prompt {i} done: ok"


def _kind(scenario: str) -> tuple[str, int]:
    name, _, n = scenario.partition("-")
    return name, int(n or 0)


def expected_requests(scenario: str) -> int:
    """How many LLM requests one run of ``scenario`` makes."""
    kind, n = _kind(scenario)
    return {"trivial": 1, "parallel": 2, "turns": n + 1, "deltas": 1, "bulkturns": n + 1, "prompts": 2 * n}[kind]


def expected_output(scenario: str) -> str:
    """A string the final answer printed by ``-p`` must contain."""
    kind, n = _kind(scenario)
    if kind == "trivial":
        return "bench trivial done"
    if kind == "parallel":
        return f"parallel done: {n} of {n} results ok"
    if kind == "turns":
        return f"turns done: {n} of {n} results ok"
    if kind == "bulkturns":
        return f"bulk turns done: {n} of {n} results ok"
    if kind == "prompts":
        return prompt_done(n)
    return DELTA_PIECE * 4  # the full text is checked by length too


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def parse_marker(body: dict) -> tuple[str, str] | None:
    """``(scenario, run_id)`` from the first user message carrying the marker, else None."""
    for msg in body.get("messages") or []:
        if isinstance(msg, dict) and msg.get("role") == "user":
            m = _MARKER_RE.search(_text_of(msg.get("content")))
            if m:
                return m.group(1), m.group(2)
    return None


def _tool_results(body: dict) -> list[str]:
    return [_text_of(m.get("content")) for m in body.get("messages") or [] if isinstance(m, dict) and m.get("role") == "tool"]


def _bulk_ok(result: str, i: int) -> bool:
    return result.strip().split("\n") == [BULK_LINE, str(i)]


def _first_bad(results: list[str], ok: Callable[[str, int], bool] = lambda r, i: r.strip() == str(i)) -> str:
    """For a failed run's report: the first tool result that is not what its command prints."""
    for i, r in enumerate(results):
        if not ok(r, i):
            return f" (result {i}: {r.strip()[:300]!r})"
    return ""


def _prompt_reply(body: dict) -> Reply:
    """``prompts-N``: a bash call for a prompt just sent, the final text after its result."""
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    i = sum(1 for m in messages if m.get("role") == "user")
    if messages and messages[-1].get("role") == "tool":
        result = _text_of(messages[-1].get("content")).strip()
        if result == str(i):
            return Reply(text=prompt_done(i), chunks=2)
        return Reply(text=f"prompt {i} failed: tool result {result[:200]!r}", chunks=2)
    return Reply(tool_calls=[_bash(f"echo {i}", f"call_{i}")])


def _bash(command: str, call_id: str) -> ScriptToolCall:
    return ScriptToolCall(name="bash", arguments={"command": command}, id=call_id, chunks=1)


@lru_cache(maxsize=4)
def _delta_sse(n: int) -> str:
    """The whole event stream of an ``n``-delta reply, sent by the server in one write.

    Sending it as one body (``raw_sse``) keeps the server's own per-frame cost out of the
    measurement: the client's parsing and relaying of the deltas is what is timed.
    """
    frames = openai_frames(Reply(text=DELTA_PIECE * n, chunks=n), "scripted-model")
    return b"".join(frames.content + frames.closing).decode()


def reply_for(body: dict) -> Reply:
    """The scripted model: the next reply for a request body (OpenAI chat completions)."""
    marker = parse_marker(body)
    if marker is None:
        return Reply(text="no benchmark marker in the prompt")
    kind, n = _kind(marker[0])
    results = _tool_results(body)
    if kind == "trivial":
        return Reply(text=expected_output("trivial"), chunks=3)
    if kind == "parallel":
        if not results:
            return Reply(tool_calls=[_bash(f"sleep 1; echo {i}", f"call_{i}") for i in range(n)])
        ok = sum(1 for i, r in enumerate(results) if r.strip() == str(i))
        return Reply(text=f"parallel done: {ok} of {n} results ok{_first_bad(results)}", chunks=3)
    if kind == "turns":
        k = len(results)
        if k < n:
            return Reply(tool_calls=[_bash(f"echo {k}", f"call_{k}")])
        ok = sum(1 for i, r in enumerate(results) if r.strip() == str(i))
        return Reply(text=f"turns done: {ok} of {n} results ok{_first_bad(results)}", chunks=3)
    if kind == "bulkturns":
        k = len(results)
        if k < n:
            return Reply(tool_calls=[_bash(BULK_COMMAND.format(i=k), f"call_{k}")])
        ok = sum(1 for i, r in enumerate(results) if _bulk_ok(r, i))
        return Reply(text=f"bulk turns done: {ok} of {n} results ok{_first_bad(results, _bulk_ok)}", chunks=3)
    if kind == "prompts":
        return _prompt_reply(body)
    if kind == "deltas":
        return Reply(raw_sse=_delta_sse(n))
    return Reply(text=f"unknown scenario {marker[0]!r}")
