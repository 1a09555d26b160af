"""End to end: the real ``pi-actors`` CLI, as a subprocess, against the scripted LLM server.

Every test here runs the whole multi-process runtime (coordinator, store, provider, tool pool
and workers) and the official SDKs over real sockets on 127.0.0.1.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess

import trio
from _procs import cmdline, environ_has, live_pids, wait_exited
from conftest import CLI

from pi_actors.testing.scripted_server import Reply
from pi_actors.testing.wire_formats import ScriptToolCall


def _events(stdout: bytes) -> list[dict]:
    return [json.loads(line) for line in stdout.decode().splitlines() if line.strip()]


async def test_print_mode_prints_the_final_assistant_text(scripted, env):
    scripted.script.append(Reply(text="Hello from the scripted model.", chunks=5))
    done = await env.run("--model", "scripted/scripted-model", "--no-session", "-p", "Say hello")
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout.decode() == "Hello from the scripted model.\n"
    request = scripted.requests[0]
    assert request["path"] == "/v1/chat/completions"
    assert request["headers"]["authorization"] == "Bearer test-key"
    assert request["body"]["messages"][-1] == {"role": "user", "content": [{"type": "text", "text": "Say hello"}]}


async def test_print_mode_talks_to_the_anthropic_messages_api_with_a_key_from_an_env_var(scripted, env):
    scripted.script.append(Reply(text="Bonjour.", chunks=2))
    done = await env.run("--model", "scripted-anthropic/scripted-claude", "--no-session", "-p", "Say hello")
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout.decode() == "Bonjour.\n"
    assert scripted.requests[0]["path"] == "/v1/messages"
    # The anthropic SDK (2.x) sends an API key as a bearer token.
    assert scripted.requests[0]["headers"]["authorization"] == "Bearer anthropic-test-key"


async def test_piped_stdin_is_the_prompt(scripted, env):
    scripted.script.append(Reply(text="Got it."))
    done = await env.run("--model", "scripted/scripted-model", "--no-session", stdin=b"what is piped in\n")
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout.decode() == "Got it.\n"
    assert scripted.requests[0]["body"]["messages"][-1]["content"] == [{"type": "text", "text": "what is piped in"}]


async def test_json_mode_prints_the_header_then_every_event_in_pi_shapes(scripted, env):
    scripted.script.append(Reply(text="Reading it.", tool_calls=[ScriptToolCall(name="read", arguments={"path": "a.txt"})]))
    scripted.script.append(Reply(text="It says hi."))
    (env.work / "a.txt").write_text("hi\n")
    done = await env.run("--model", "scripted/scripted-model", "--no-session", "--mode", "json", "Read a.txt")
    assert done.returncode == 0, done.stderr.decode()
    events = _events(done.stdout)
    assert events[0]["type"] == "session" and events[0]["version"] == 3
    kinds = [e["type"] for e in events[1:] if e["type"] != "message_update"]
    assert kinds == [
        "agent_start", "turn_start", "message_start", "message_end",
        "message_start", "message_end",
        "tool_execution_start", "tool_execution_end", "message_start", "message_end",
        "turn_end", "turn_start", "message_start", "message_end", "turn_end", "agent_end",
    ]  # fmt: skip
    updates = [e for e in events if e["type"] == "message_update"]
    assert updates and all("assistantMessageEvent" in u and u["message"]["role"] == "assistant" for u in updates)
    first_reply = [u for u in updates if u["message"]["content"] and u["message"]["content"][0].get("text", "").startswith("Read")]
    deltas = [u for u in first_reply if u["assistantMessageEvent"]["type"] == "text_delta"]
    # Deltas may be coalesced when they cross a process boundary; their text may not change.
    assert "".join(d["assistantMessageEvent"]["delta"] for d in deltas) == "Reading it."
    assert deltas[-1]["assistantMessageEvent"]["partial"]["content"][0]["text"] == "Reading it."
    assert deltas[-1]["message"]["content"][0]["text"] == "Reading it."
    tool_updates = [u for u in first_reply if u["assistantMessageEvent"]["type"] == "toolcall_end"]
    assert tool_updates[0]["assistantMessageEvent"]["toolCall"]["arguments"] == {"path": "a.txt"}
    end = next(e for e in events if e["type"] == "tool_execution_end")
    assert end["toolName"] == "read" and end["isError"] is False and "toolCallId" in end
    assert end["result"]["content"] == [{"type": "text", "text": "hi\n"}]
    final = [e for e in events if e["type"] == "message_end"][-1]["message"]
    assert final["stopReason"] == "stop" and final["content"] == [{"type": "text", "text": "It says hi."}]
    turn_end = next(e for e in events if e["type"] == "turn_end")
    assert turn_end["toolResults"][0]["role"] == "toolResult"


async def test_parallel_tool_calls_run_together_and_results_come_back_in_call_order(scripted, env):
    # Call A cannot finish before call C has run: only concurrent execution completes it, and
    # A finishes last, yet its result must come first.
    wait_for_c = "while [ ! -f c.done ]; do sleep 0.01; done; echo A"
    scripted.script.append(
        Reply(
            tool_calls=[
                ScriptToolCall(name="bash", arguments={"command": wait_for_c}),
                ScriptToolCall(name="nonexistent", arguments={}),
                ScriptToolCall(name="bash", arguments={"command": "touch c.done; echo C"}),
            ]
        )
    )
    scripted.script.append(Reply(text="All done."))
    done = await env.run("--model", "scripted/scripted-model", "--no-session", "--mode", "json", "go")
    assert done.returncode == 0, done.stderr.decode()
    events = _events(done.stdout)
    ends = [e for e in events if e["type"] == "tool_execution_end"]
    # Each call ends as it finishes (pi 0.73): the unknown tool at once; the results are
    # in call order.
    assert ends[0]["result"]["content"][0]["text"] == "Tool nonexistent not found"
    texts = ["A", "Tool nonexistent not found", "C"]
    assert sorted(e["result"]["content"][0]["text"].strip() for e in ends) == sorted(texts)
    turn_end = next(e for e in events if e["type"] == "turn_end")
    assert [r["content"][0]["text"].strip() for r in turn_end["toolResults"]] == texts
    # The second request carries the results in call order too.
    tool_msgs = [m for m in scripted.requests[1]["body"]["messages"] if m["role"] == "tool"]
    assert [m["content"].strip() for m in tool_msgs] == texts


async def test_a_missing_api_key_is_a_one_line_error_and_exit_code_1(env):
    done = await env.run("--model", "anthropic/claude-sonnet-4-5", "--no-session", "-p", "hi")
    assert done.returncode == 1
    err = done.stderr.decode().strip()
    assert len(err.splitlines()) == 1 and "anthropic" in err.lower() and "key" in err.lower()
    assert "Traceback" not in err


async def test_provider_flag_selects_the_provider_of_a_bare_model_id(scripted, env):
    scripted.script.append(Reply(text="From the anthropic wire."))
    done = await env.run("--provider", "scripted-anthropic", "--model", "scripted-claude", "--no-session", "-p", "hi")
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout.decode() == "From the anthropic wire.\n"
    assert scripted.requests[0]["path"] == "/v1/messages"


async def test_an_unknown_model_is_a_one_line_error_and_exit_code_1(env):
    done = await env.run("--model", "no-such-model-anywhere", "-p", "hi")
    assert done.returncode == 1
    err = done.stderr.decode().strip()
    assert err == 'Error: Model "no-such-model-anywhere" not found. Use --list-models to see available models.'


async def test_an_unreachable_provider_is_a_one_line_error_and_exit_code_1(env, tmp_path):
    models = json.loads((env.home / "models.json").read_text())
    models["providers"]["scripted"]["baseUrl"] = "http://127.0.0.1:9/v1"  # discard port: refused
    (env.home / "models.json").write_text(json.dumps(models))
    done = await env.run("--model", "scripted/scripted-model", "--no-session", "-p", "hi")
    assert done.returncode == 1
    err = done.stderr.decode().strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err and err


async def test_session_file_holds_every_message_of_the_run(scripted, env):
    scripted.script.append(Reply(tool_calls=[ScriptToolCall(name="bash", arguments={"command": "echo saved"})]))
    scripted.script.append(Reply(text="Saved."))
    done = await env.run("--model", "scripted/scripted-model", "--session-dir", str(env.sessions), "-p", "save me")
    assert done.returncode == 0, done.stderr.decode()
    files = list(env.sessions.glob("*.jsonl"))
    assert len(files) == 1
    lines = [json.loads(line) for line in files[0].read_text().splitlines()]
    assert lines[0]["type"] == "session" and lines[0]["version"] == 3 and lines[0]["cwd"] == str(env.work)
    roles = [e["message"]["role"] for e in lines[1:] if e["type"] == "message"]
    assert roles == ["user", "assistant", "toolResult", "assistant"]
    ids = [e["id"] for e in lines[1:]]
    assert [e["parentId"] for e in lines[1:]] == [None, *ids[:-1]]


async def test_a_session_that_cannot_be_written_stops_the_run_with_a_clear_error(scripted, env):
    scripted.script.append(Reply(text="This answer cannot be saved."))
    blocker = env.work / "not-a-directory"
    blocker.write_text("")
    done = await env.run("--model", "scripted/scripted-model", "--session-dir", str(blocker / "sessions"), "-p", "hi")
    assert done.returncode == 1
    err = done.stderr.decode().strip()
    # Refused before the model is asked (cli-first: tests/test_cli_first_contact.py has the rest).
    assert err.startswith(f"Error: Cannot save the session in {blocker / 'sessions'}: Not a directory")
    assert "--no-session" in err and "--session-dir" in err
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert scripted.requests == []


def _marked_pids(marker: str) -> list[int]:
    return live_pids(lambda pid: environ_has(pid, f"PI_ACTORS_TEST_MARKER={marker}"))


async def test_killing_the_root_with_sigkill_leaves_no_process_behind(scripted, env):
    scripted.script.append(
        Reply(
            tool_calls=[
                ScriptToolCall(name="bash", arguments={"command": f"sleep 1000 & sleep 1001 & echo started {i}; wait"})
                for i in range(3)
            ]
        )
    )
    proc = await trio.lowlevel.open_process(
        [CLI, "--model", "scripted/scripted-model", "--no-session", "--mode", "json", "run forever"],
        env=env.env,
        cwd=env.work,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    try:
        # Read events until all three bash calls report that their children were forked.
        started: set[str] = set()
        buffer = b""
        with trio.fail_after(30):
            while len(started) < 3:
                data = await proc.stdout.receive_some()
                assert data, "the CLI ended before the tool calls started"
                buffer += data
                *lines, buffer = buffer.split(b"\n")
                for line in lines:
                    event = json.loads(line)
                    if event["type"] == "tool_execution_update" and event["partialResult"].get("content"):
                        started.add(event["toolCallId"])
        pids = _marked_pids(env.marker)
        # root, 4 actors, 3 tool workers (more may be warming), 3 shells, 6 sleeps (forked by
        # the shells before they printed "started"; they carry the marker either way)
        assert len(pids) >= 1 + 4 + 3 + 3 + 6, [cmdline(p) for p in pids]
        os.kill(proc.pid, signal.SIGKILL)
        await proc.wait()
        await wait_exited(pids, timeout=10)
        assert not _marked_pids(env.marker)
    finally:
        for pid in _marked_pids(env.marker):
            os.kill(pid, signal.SIGKILL)


async def test_demo_runs_a_multi_process_session_without_any_api_key(env):
    done = await env.run("demo")
    out = done.stdout.decode()
    assert done.returncode == 0, done.stderr.decode() + out
    assert "▶ bash" in out and "✓ read" in out
    assert "slow call finished" in out
    assert "Done. I ran five tool calls" in out
    assert "session:" in out


async def test_settings_json_configures_auto_retry_and_a_broken_project_file_is_a_warning(scripted, env):
    (env.home / "settings.json").write_text(json.dumps({"retry": {"baseDelayMs": 1}}))
    (env.work / ".pi-actors").mkdir()
    (env.work / ".pi-actors" / "settings.json").write_text("{not json")
    scripted.script += [Reply(status=503, error_body={"error": {"message": "Overloaded"}}), Reply(text="Second time lucky.")]
    done = await env.run("--model", "scripted/scripted-model", "--no-session", "--mode", "json", "hi")
    assert done.returncode == 0, done.stderr.decode()
    kinds = [e["type"] for e in _events(done.stdout)]
    assert kinds.index("auto_retry_start") < kinds.index("auto_retry_end")
    assert "Warning (settings): cannot read" in done.stderr.decode()


async def test_log_file_lines_name_the_session_request_tool_call_and_provider(scripted, env):
    scripted.script += [Reply(tool_calls=[ScriptToolCall(name="bash", arguments={"command": "echo logged"})]), Reply(text="ok")]
    log = env.work / "run.log"
    done = await env.run("--model", "scripted/scripted-model", "--no-session", "--log-file", str(log), "-p", "go")
    assert done.returncode == 0, done.stderr.decode()
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert {line["actor"] for line in lines} >= {"coordinator", "provider"}
    session = lines[0]["session"]
    assert all(line["session"] == session for line in lines if "session" in line)
    llm = [line for line in lines if line["event"] in ("llm_request", "llm_response", "stream_start", "stream_end")]
    assert len(llm) == 8 and all(line["request"] and line["provider"] == "scripted" for line in llm)
    assert len({line["request"] for line in llm}) == 2  # two requests, each seen by both actors
    tools = [line for line in lines if line["event"] in ("tool_start", "tool_end")]
    assert [line["event"] for line in tools] == ["tool_start", "tool_end"] and tools[0]["toolCallId"] == tools[1]["toolCallId"]


async def test_writes_to_one_file_in_one_reply_land_in_call_order(scripted, env):
    scripted.script.append(
        Reply(tool_calls=[ScriptToolCall(name="write", arguments={"path": "same.txt", "content": f"version {i}\n"}) for i in range(1, 5)])
    )
    scripted.script.append(Reply(text="written"))
    done = await env.run("--model", "scripted/scripted-model", "--no-session", "-p", "write it four times")
    assert done.returncode == 0, done.stderr.decode()
    assert (env.work / "same.txt").read_text() == "version 4\n"


async def test_print_mode_prints_the_answer_before_the_actors_are_shut_down(monkeypatch):
    # -p prints once the last run has ended; only then does the runtime close (and the exit
    # still waits for it). A stand-in runtime records when it is left.
    import contextlib

    import pi_actors.actors
    from pi_actors.cli import _client
    from pi_actors.cli._render import PrintRenderer
    from pi_actors.cli.main import run_prompts

    order: list[str] = []

    class Coordinator:
        async def call(self, method, args=None):
            assert method == "session"
            return {"header": {}}

    @contextlib.asynccontextmanager
    async def fake_runtime(config, **placement):
        yield Coordinator()
        order.append("runtime closed")

    async def fake_send_prompt(coordinator, text, renderer):
        order.append(f"prompt {text}")
        renderer.event({"type": "message_end", "message": {"role": "assistant", "stopReason": "stop",
                                                           "content": [{"type": "text", "text": f"answer to {text}"}]}})

    class Out:
        def write(self, text):
            order.append(f"printed {text!r}")

        def flush(self):
            order.append("flushed")

    monkeypatch.setattr(pi_actors.actors, "open_local_runtime", fake_runtime)
    monkeypatch.setattr(_client, "send_prompt", fake_send_prompt)
    code = await run_prompts({}, ["one", "two"], PrintRenderer(out=Out(), err=Out()))
    assert code == 0
    assert order == ["prompt one", "prompt two", "printed 'answer to two\\n'", "flushed", "runtime closed"]


async def test_the_store_can_share_the_coordinators_process_and_still_writes_durably(scripted, tmp_path):
    import io

    from pi_actors.actors import open_local_runtime
    from pi_actors.ai import types as T
    from pi_actors.cli._client import send_prompt
    from pi_actors.cli._render import PrintRenderer
    from pi_actors.cli.main import runtime_config

    scripted.script.append(Reply(text="Kept."))
    model = T.Model(id="scripted-model", api="openai-completions", provider="scripted", base_url=scripted.base_url_openai)
    sessions = tmp_path / "sessions"
    config = runtime_config(model=model, thinking="off", tools=[], cwd=str(tmp_path), system_prompt="test",
                            agent_dir=str(tmp_path), session={"sessionDir": str(sessions), "agentDir": str(tmp_path)},
                            runtime_keys={"scripted": "k"}, key_sources={})
    processes: dict = {}
    with trio.fail_after(60):
        async with open_local_runtime(config, processes=processes, store_with_coordinator=True) as coordinator:
            assert sorted(processes) == ["coordinator", "provider", "tool-pool"]
            await coordinator.call("session")
            renderer = PrintRenderer(out=io.StringIO())
            await send_prompt(coordinator, "keep this", renderer)
    assert renderer.last_assistant["content"][0]["text"] == "Kept."
    [file] = sessions.glob("*.jsonl")
    entries = [json.loads(line) for line in file.read_text().splitlines()[1:]]
    assert [e["type"] for e in entries[:2]] == ["model_change", "thinking_level_change"]
    assert [e.get("message", {}).get("role") for e in entries[2:]] == ["user", "assistant"]
    assert all(p.returncode == 0 for p in processes.values())


async def test_an_answer_whose_reader_went_away_exits_141_without_a_traceback(scripted, env):
    # The answer is larger than a pipe holds, and nobody reads it: the write fails with a
    # broken pipe, which is exit code 141 (the CLI then ends without interpreter teardown).
    # Its stderr goes to a file: this waits for the CLI's own exit, not for every process
    # it started to close an inherited stderr (the sandbox's teardown is checked elsewhere).
    scripted.script.append(Reply(text="x" * 300_000, chunks=30))
    read_end, write_end = os.pipe()
    os.close(read_end)
    stderr_path = env.work / "stderr.txt"
    try:
        with open(stderr_path, "wb") as stderr, trio.fail_after(60):
            process = await trio.lowlevel.open_process(
                [CLI, "--model", "scripted/scripted-model", "--no-session", "-p", "hi"],
                stdin=subprocess.DEVNULL, stdout=write_end, stderr=stderr, env=env.env, cwd=env.work,
            )
            try:
                returncode = await process.wait()
            finally:
                if process.returncode is None:
                    process.kill()  # timed out: nothing outlives the test
    finally:
        os.close(write_end)
    errors = stderr_path.read_bytes()
    assert returncode == 141, errors.decode()
    assert b"Traceback" not in errors
