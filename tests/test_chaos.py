"""Chaos: the real CLI (``--mode rpc`` and print mode), its actors killed (SIGKILL) and stopped
(SIGSTOP) at chosen moments of a run, against the scripted model.

For each actor kind (provider, tool pool, coordinator with its store), one rpc session goes
through four faults — SIGKILL mid-stream (the model's reply held open), mid-tool (a bash call
blocked reading a FIFO) and idle (between prompts), then SIGSTOP where the actor is busy —
and after each:

* the run ends (or recovers) — ``trio.fail_after`` is only the safety net;
* the next prompt succeeds;
* at the end, every message whose ``message_end`` the UI saw is in the session file, and no
  process of the session is left once the CLI has exited.

"Between turns" is covered by the kinds' phases: a provider killed mid-tool dies between
two requests of one run (the run goes on with the restarted provider), a pool killed
mid-stream dies between two tool batches.

Moments are chosen by waiting for events (the CLI's own event lines, its stderr notes, a
FIFO the tool blocks on), never by sleeping. The liveness check is shortened through
``settings.json`` (``supervision``) so that a stopped actor is caught in about a second.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
from collections.abc import Callable
from typing import Any

import pytest
import trio
from _procs import cmdline, environ_has, live_pids, process_state, wait_exited, wait_for_pids
from conftest import CLI

from pi_actors.testing.scripted_server import Reply
from pi_actors.testing.wire_formats import ScriptToolCall

SUPERVISION = {"heartbeatInterval": 0.2, "heartbeatTimeout": 1.5, "maxRestarts": 50, "backoffFirst": 0.01, "backoffMax": 0.01}
# (one session for all kinds: the start-up is shared; faults come one after another)
#: The process name of each actor kind, and how the root's stderr names it.
KINDS = {"provider": "provider", "tool-pool": "tool pool", "coordinator": "coordinator"}
#: SIGKILL at every phase; SIGSTOP (caught by the liveness check, the same for every phase)
#: where the actor is busy: the provider streaming, the pool running a tool, the coordinator
#: in the middle of a run. Fewer faults keep the module within the CI budget.
KILLS = [(signal.SIGKILL, "mid-stream"), (signal.SIGKILL, "mid-tool"), (signal.SIGKILL, "idle")]
STOPS = {"provider": "mid-stream", "tool-pool": "mid-tool", "coordinator": "mid-tool"}


def phases(kind: str) -> list[tuple[int, str]]:
    return [*KILLS, (signal.SIGSTOP, STOPS[kind])]


class Rpc:
    """A ``pi-actors --mode rpc`` process: lines in, event and response lines out."""

    def __init__(self, proc: trio.Process) -> None:
        self.proc = proc
        self.lines: list[dict] = []
        self.stderr: list[str] = []
        self._changed = trio.Event()
        self._ids = 0

    async def pump(self, stream: Any, into: list, parse: Callable[[bytes], Any]) -> None:
        buffer = b""
        while True:
            data = await stream.receive_some()
            if not data:
                return
            buffer += data
            *complete, buffer = buffer.split(b"\n")
            for line in complete:
                if line.strip():
                    into.append(parse(line))
            self._changed.set()
            self._changed = trio.Event()

    async def send(self, command: dict) -> int:
        self._ids += 1
        await self.proc.stdin.send_all(json.dumps({"id": self._ids, **command}).encode() + b"\n")
        return self._ids

    async def wait(self, predicate: Callable[[dict], bool], start: int = 0) -> dict:
        """The first line from ``start`` on that satisfies ``predicate``."""
        while True:
            for line in self.lines[start:]:
                if predicate(line):
                    return line
            await self._changed.wait()

    async def wait_stderr(self, text: str, count: int) -> None:
        while sum(text in line for line in self.stderr) < count:
            await self._changed.wait()

    async def prompt_ok(self, text: str) -> dict:
        """A prompt that must succeed: returns its last assistant message."""
        start = len(self.lines)
        request = await self.send({"type": "prompt", "message": text})
        await self.wait(lambda line: line.get("id") == request and line.get("type") == "response", start)
        end = await self.wait(lambda line: line.get("type") == "agent_end", start)
        failed = [line for line in self.lines[start:] if line.get("id") == request and line.get("success") is False]
        assert not failed, failed
        final = [m for m in end["messages"] if m["role"] == "assistant"][-1]
        assert final["stopReason"] in ("stop", "toolUse"), (final.get("errorMessage"), self.stderr)
        return final


def _started(pid: int) -> int:
    with open(f"/proc/{pid}/stat", "rb") as f:
        data = f.read()
    return int(data[data.rindex(b")") + 2 :].split()[19])  # field 22: start time in ticks


async def _actor_pid(marker: str, name: str) -> int:
    """The pid of the session's ``name`` actor. A warm spare of the provider or the pool may
    run beside it; spares are started after a run ends and adopted at a restart, so the
    actor in use is always the older of the two. A replaced actor that an earlier fault
    stopped (SIGSTOP) is not counted, and one still being stopped by its supervisor is
    waited for: on a loaded machine its end may come a moment after the restart."""

    def candidates() -> list[int]:
        pids = live_pids(lambda pid: environ_has(pid, f"PI_ACTORS_TEST_MARKER={marker}")
                         and cmdline(pid).endswith(f"pi_actors.runtime.child {name}")
                         and process_state(pid) not in ("T", "t"))  # fmt: skip
        return pids if 1 <= len(pids) <= (1 if name == "coordinator" else 2) else []

    pids = await wait_for_pids(candidates, timeout=60)
    return min(pids, key=_started)


def _marked(marker: str) -> list[int]:
    return live_pids(lambda pid: environ_has(pid, f"PI_ACTORS_TEST_MARKER={marker}"))


async def _release(fifo: str) -> None:
    """Let the tool blocked on ``fifo`` finish. The blocking open waits for the event itself:
    the tool's reader (``cat``) may open the fifo a moment after its first output."""

    def write() -> None:
        fd = os.open(fifo, os.O_WRONLY)
        os.write(fd, b"released\n")
        os.close(fd)

    with trio.fail_after(60):
        await trio.to_thread.run_sync(write, abandon_on_cancel=True)


async def _fault(rpc: Rpc, scripted: Any, env: Any, kind: str, sig: int, phase: str, n: int) -> None:
    """One fault: reach ``phase``, signal ``kind``, check that the run ends as it should."""
    label = KINDS[kind]
    how = "was killed by SIGKILL" if sig == signal.SIGKILL else "did not answer a liveness check"
    note = f"the {label} process {how}"
    notes = sum(note in line for line in rpc.stderr)
    fifo = str(env.work / f"gate-{n}")
    start = len(rpc.lines)
    request = None
    if phase == "mid-stream":
        scripted.script.append(Reply(text=f"held open {n}", hang_after_start=True))
        request = await rpc.send({"type": "prompt", "message": f"stream {n}"})
        await rpc.wait(lambda line: line.get("type") == "message_update" and line["message"]["role"] == "assistant", start)
    elif phase == "mid-tool":
        os.mkfifo(fifo)
        scripted.script += [
            Reply(tool_calls=[ScriptToolCall(name="bash", arguments={"command": f"echo started; cat {fifo}"})]),
            Reply(text=f"after the tool {n}"),
        ]
        request = await rpc.send({"type": "prompt", "message": f"tool {n}"})
        # The command's output (bash's first update, empty, comes before it runs).
        await rpc.wait(lambda line: line.get("type") == "tool_execution_update" and line["partialResult"].get("content"), start)
    os.kill(await _actor_pid(env.marker, kind), sig)
    await rpc.wait_stderr(note, notes + 1)
    if phase == "idle":
        return
    if kind == "coordinator":
        # The prompt in flight fails with one clear error; the set restarts.
        response = await rpc.wait(lambda line: line.get("id") == request and line.get("success") is False, start)
        assert response["error"].startswith(note) and "the outcome of the prompt is unknown" in response["error"]
        if phase == "mid-tool":
            os.unlink(fifo)
            scripted.script.pop()  # the reply after the tool: the run never got there
        return
    if kind == "provider" and phase == "mid-stream":
        end = await rpc.wait(lambda line: line.get("type") == "agent_end", start)
        final = end["messages"][-1]
        assert final["stopReason"] == "error" and final["errorMessage"].startswith(note)
        assert final["errorMessage"].endswith("the outcome of the request is unknown")
    elif kind == "provider":  # mid-tool: the tool finishes, the next request reaches the new provider
        await _release(fifo)
        end = await rpc.wait(lambda line: line.get("type") == "agent_end", start)
        assert end["messages"][-1]["content"][0]["text"] == f"after the tool {n}"
    elif phase == "mid-stream":  # the pool died while the model streamed: the run is not hurt
        await rpc.send({"type": "abort"})
        await rpc.wait(lambda line: line.get("type") == "agent_end", start)
    else:  # the pool died mid-tool: that call fails clearly, the run goes on
        end = await rpc.wait(lambda line: line.get("type") == "tool_execution_end", start)
        assert end["isError"] and end["result"]["content"][0]["text"].startswith(note)
        assert end["result"]["content"][0]["text"].endswith("the outcome of the tool call is unknown")
        end = await rpc.wait(lambda line: line.get("type") == "agent_end", start)
        assert end["messages"][-1]["content"][0]["text"] == f"after the tool {n}"
    await rpc.wait(lambda line: line.get("id") == request and line.get("type") == "response", start)


async def test_killed_or_stopped_actors_are_restarted_and_the_next_prompt_works(scripted, env):
    """One rpc session (start-up shared) takes every fault of every kind in turn."""
    (env.home / "settings.json").write_text(json.dumps({"supervision": SUPERVISION, "retry": {"enabled": False}}))
    proc = await trio.lowlevel.open_process(
        [CLI, "--model", "scripted/scripted-model", "--mode", "rpc", "--session-dir", str(env.sessions)],
        env=env.env, cwd=env.work, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    rpc = Rpc(proc)
    faults = [(kind, sig, phase) for kind in KINDS for sig, phase in phases(kind)]
    try:
        with trio.fail_after(180):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(rpc.pump, proc.stdout, rpc.lines, json.loads)
                nursery.start_soon(rpc.pump, proc.stderr, rpc.stderr, lambda b: b.decode(errors="replace"))
                scripted.script.append(Reply(text="ready"))
                await rpc.prompt_ok("hello")
                for n, (kind, sig, phase) in enumerate(faults):
                    await _fault(rpc, scripted, env, kind, sig, phase, n)
                    # The next prompt uses the restarted actor (the pool: through a tool call).
                    if kind == "tool-pool":
                        scripted.script += [
                            Reply(tool_calls=[ScriptToolCall(name="bash", arguments={"command": f"echo works {n}"})]),
                            Reply(text=f"next {n}"),
                        ]
                    else:
                        scripted.script.append(Reply(text=f"next {n}"))
                    final = await rpc.prompt_ok(f"next {n}")
                    assert final["content"][0]["text"] == f"next {n}", (kind, sig, phase)
                state_id = await rpc.send({"type": "get_state"})
                state = await rpc.wait(lambda line: line.get("id") == state_id)
                pids = _marked(env.marker)
                await proc.stdin.aclose()
                assert await proc.wait() == 0, rpc.stderr
                await wait_exited(pids, timeout=20)
        assert not _marked(env.marker)
    finally:
        for pid in _marked(env.marker):
            os.kill(pid, signal.SIGKILL)
    # Every message the UI saw end is in the session file.
    path = state["data"]["sessionFile"]
    saved = [json.loads(line) for line in open(path)]
    stamps = {(e["message"]["role"], e["message"]["timestamp"]) for e in saved if e.get("type") == "message"}
    seen = [line["message"] for line in rpc.lines if line.get("type") == "message_end"]
    assert seen and all((m["role"], m["timestamp"]) in stamps for m in seen)
    # Each fault was reported once, in one line; no traceback anywhere.
    assert sum("restarting" in line for line in rpc.stderr) == len(faults), rpc.stderr
    assert not any("Traceback" in line for line in rpc.stderr), rpc.stderr


async def test_a_coordinator_killed_in_print_mode_gives_one_line_and_exit_status_1(scripted, env):
    scripted.script.append(Reply(text="held open", hang_after_start=True))
    proc = await trio.lowlevel.open_process(
        [CLI, "--model", "scripted/scripted-model", "--no-session", "--mode", "json", "talk"],
        env=env.env, cwd=env.work, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        with trio.fail_after(60):
            buffer = b""
            while b'"message_update"' not in buffer:
                data = await proc.stdout.receive_some()
                assert data, "the CLI ended before the model streamed"
                buffer += data
            pids = _marked(env.marker)
            os.kill(await _actor_pid(env.marker, "coordinator"), signal.SIGKILL)
            err = b""
            async for data in proc.stderr:
                err += data
            assert await proc.wait() == 1
            await wait_exited(pids, timeout=20)
    finally:
        for pid in _marked(env.marker):
            os.kill(pid, signal.SIGKILL)
    assert err.decode().splitlines() == [
        "Error: the coordinator process was killed by SIGKILL; the outcome of the prompt is unknown"
    ]


async def test_a_prompt_larger_than_one_message_is_refused_in_one_line(scripted, env):
    done = await env.run("--model", "scripted/scripted-model", "--no-session", stdin=b"x" * 20_000_000)
    assert done.returncode == 1
    err = done.stderr.decode().splitlines()
    assert len(err) == 1, "\n".join(err)
    # 20,000,000 bytes of text plus the call's envelope and other arguments.
    assert re.match(r"Error: the 'prompt' call is 20,000,\d{3} bytes", err[0]) and "16 MiB" in err[0], err
    assert scripted.requests == []


async def test_ctrl_c_while_the_actors_start_is_one_line_and_exit_status_130(scripted, env):
    # The actors open the log file as they start: a FIFO there tells us start-up is under way.
    log = env.work / "log.fifo"
    os.mkfifo(log)
    proc = await trio.lowlevel.open_process(
        [CLI, "--model", "scripted/scripted-model", "--no-session", "--log-file", str(log), "-p", "hello"],
        env=env.env, cwd=env.work, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    reader = None
    try:
        with trio.fail_after(60):
            reader = await trio.to_thread.run_sync(os.open, str(log), os.O_RDONLY)  # returns once an actor opened it
            os.set_blocking(reader, False)
            pids = _marked(env.marker)
            proc.send_signal(signal.SIGINT)
            err = b""
            async for data in proc.stderr:
                err += data
            assert await proc.wait() == 130
            await wait_exited(pids, timeout=20)
    finally:
        if reader is not None:
            os.close(reader)
        for pid in _marked(env.marker):
            os.kill(pid, signal.SIGKILL)
    assert err.decode().splitlines() == ["Interrupted."]
    assert scripted.requests == []


@pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")
async def test_the_tui_shows_a_dead_coordinator_in_one_line_and_the_next_prompt_works(scripted, env, pane):
    scripted.script += [Reply(text="held open", hang_after_start=True), Reply(text="answered after the restart")]
    await pane.start(session=True)
    await pane.type("first")
    await pane.keys("Enter")
    await pane.wait_for("held open")
    os.kill(await _actor_pid(env.marker, "coordinator"), signal.SIGKILL)
    await pane.wait_for("the coordinator process was killed by SIGKILL; the outcome of the prompt is unknown")
    await pane.type("second")
    await pane.keys("Enter")
    screen = await pane.wait_for("answered after the restart")
    assert "Traceback" not in screen


async def test_too_many_restarts_end_an_rpc_session_with_one_line_and_exit_status_1(scripted, env):
    settings = {"supervision": {**SUPERVISION, "maxRestarts": 1, "spares": False}, "retry": {"enabled": False}}
    (env.home / "settings.json").write_text(json.dumps(settings))
    proc = await trio.lowlevel.open_process(
        [CLI, "--model", "scripted/scripted-model", "--mode", "rpc", "--no-session"],
        env=env.env, cwd=env.work, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    rpc = Rpc(proc)
    try:
        with trio.fail_after(60):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(rpc.pump, proc.stdout, rpc.lines, json.loads)
                nursery.start_soon(rpc.pump, proc.stderr, rpc.stderr, lambda b: b.decode(errors="replace"))
                scripted.script.append(Reply(text="ready"))
                await rpc.prompt_ok("hello")
                pids = _marked(env.marker)
                os.kill(await _actor_pid(env.marker, "provider"), signal.SIGKILL)
                await rpc.wait_stderr("the provider process was killed by SIGKILL; restarting it", 1)
                scripted.script.append(Reply(text="still fine"))
                await rpc.prompt_ok("again")  # the one restart allowed worked
                os.kill(await _actor_pid(env.marker, "provider"), signal.SIGKILL)
                assert await proc.wait() == 1  # without waiting for stdin to close
                await wait_exited(pids, timeout=20)
    finally:
        for pid in _marked(env.marker):
            os.kill(pid, signal.SIGKILL)
    errors = [line for line in rpc.stderr if line.startswith("Error:")]
    assert errors == [
        "Error: session failed: the provider process was killed by SIGKILL, and the provider failed again"
        " after 1 restart within 60 s; giving up"
    ], rpc.stderr
    assert not any("Traceback" in line for line in rpc.stderr)
