"""Extensions through the real CLI: tools the scripted model calls in -p, json and rpc
modes; a tool_call hook that blocks bash; load and hook crashes; ctx.ui.confirm over RPC."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import trio
from support.rpc import RpcClient
from support.wire import content_text, ends_in_call_order

from pi_actors.testing.scripted_server import Reply
from pi_actors.testing.wire_formats import ScriptToolCall

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "extensions"
HELLO = str(EXAMPLES / "hello_tool.py")
GATE = str(EXAMPLES / "permission_gate.py")
MODEL = ("--model", "scripted/scripted-model", "--no-session")


def _tool_texts(request: dict) -> list[str]:
    """The texts of the tool results an OpenAI chat request carries."""
    out = []
    for m in request["body"]["messages"]:
        if m["role"] == "tool":
            content = m["content"]
            out.append(content if isinstance(content, str) else "".join(b.get("text", "") for b in content))
    return out


async def test_print_mode_runs_an_extension_tool_and_skips_one_that_fails_to_load_with_one_line(scripted, env):
    broken = env.work / "broken.py"
    broken.write_text("def register(pi):\n    raise RuntimeError('boom at load')\n")
    scripted.script += [Reply(tool_calls=[ScriptToolCall(name="hello", arguments={"name": "Bob"})]), Reply(text="Greeted.")]
    result = await env.run(*MODEL, "-e", str(broken), "-e", HELLO, "-p", "/hello Ann", "greet Bob")
    stderr = result.stderr.decode()
    assert result.returncode == 0, stderr
    assert result.stdout.decode() == "Greeted.\n"
    # The extension's /hello ran without reaching the model; its notification is on stderr.
    assert "[info] hello Ann" in stderr.splitlines()
    assert len(scripted.requests) == 2 and "/hello" not in json.dumps(scripted.requests[0]["body"])
    assert _tool_texts(scripted.requests[1]) == ["hello Bob"]
    assert [line for line in stderr.splitlines() if "broken.py" in line] == [
        f"Extension error ({broken}, load): register failed: RuntimeError: boom at load"
    ]
    # The model was offered the extension's tool with its schema.
    offered = {t["function"]["name"]: t["function"] for t in scripted.requests[0]["body"]["tools"]}
    assert offered["hello"]["parameters"]["required"] == ["name"]


REWRITES = (
    "def register(pi):\n"
    "    pi.on('input', lambda e, ctx: {'action': 'transform', 'text': e['text'] + ', politely'})\n"
    "    pi.on('before_agent_start', lambda e, ctx: {'systemPrompt': e['systemPrompt'] + ' EXT-RULES'})\n"
    "    def context(e, ctx):\n"
    "        return {'messages': e['messages'] + [{'role': 'user', 'content': 'CTX-NOTE', 'timestamp': 0}]}\n"
    "    pi.on('context', context)\n"
    "    def tool_call(e, ctx):\n"
    "        if e['input'].get('command') == 'echo harmless':\n"
    "            return {'input': {'command': 'echo rewritten'}}\n"
    "    pi.on('tool_call', tool_call)\n"
    "    def tool_result(e, ctx):\n"
    "        if e['input'].get('command') == 'echo rewritten':\n"
    "            return {'content': [{'type': 'text', 'text': e['content'][0]['text'].strip() + ' (checked)'}]}\n"
    "    pi.on('tool_result', tool_result)\n"
)


async def test_json_mode_shows_the_extension_tool_the_gate_blocking_rm_rf_and_hooks_rewriting(scripted, env):
    victim = env.work / "keep"
    victim.mkdir()
    rewrites = env.work / "rewrites.py"
    rewrites.write_text(REWRITES)
    scripted.script += [
        Reply(tool_calls=[
            ScriptToolCall(name="hello", arguments={"name": "Ann"}),
            ScriptToolCall(name="bash", arguments={"command": f"rm -rf {victim}"}),
            ScriptToolCall(name="bash", arguments={"command": "echo harmless"}),
        ]),  # fmt: skip
        Reply(text="Done."),
    ]
    result = await env.run(*MODEL, "-e", HELLO, "-e", GATE, "-e", str(rewrites), "--mode", "json", "go")
    assert result.returncode == 0, result.stderr.decode()
    events = [json.loads(line) for line in result.stdout.decode().splitlines()]
    ends = ends_in_call_order(events)
    texts = ["".join(b.get("text", "") for b in e["result"]["content"]) for e in ends]
    assert [e["toolName"] for e in ends] == ["hello", "bash", "bash"]
    assert texts[0] == "hello Ann" and not ends[0]["isError"]
    assert texts[1] == f"Blocked by the permission gate: rm -rf {victim}" and ends[1]["isError"]
    assert texts[2] == "rewritten (checked)" and not ends[2]["isError"]  # tool_call and tool_result rewrote
    assert victim.is_dir()
    # The extension's update streamed while its tool ran.
    assert any(e.get("type") == "tool_execution_update" and e["toolName"] == "hello" for e in events)
    # The model got the results in call order.
    assert _tool_texts(scripted.requests[1]) == ["hello Ann", f"Blocked by the permission gate: rm -rf {victim}", "rewritten (checked)"]
    # input, before_agent_start and context changed what the model was sent.
    first = scripted.requests[0]["body"]["messages"]
    assert first[0]["content"].endswith(" EXT-RULES") and content_text(first[1]["content"]) == "go, politely"
    assert content_text(first[-1]["content"]) == "CTX-NOTE" and content_text(scripted.requests[1]["body"]["messages"][-1]["content"]) == "CTX-NOTE"
    # ... but the session keeps its own context: the note was sent, not saved.
    saved = [e for e in events if e.get("type") == "message_end"]
    assert all("CTX-NOTE" not in json.dumps(e["message"]) for e in saved)


async def test_a_crash_during_a_hook_is_reported_the_host_restarts_and_the_session_goes_on(scripted, env):
    marker = env.work / "crashed-once"
    crashing = env.work / "crashing.py"
    crashing.write_text(
        "import os\n"
        f"MARKER = {str(marker)!r}\n"
        "def register(pi):\n"
        "    def on_tool_call(event, ctx):\n"
        "        if event['toolName'] == 'bash' and not os.path.exists(MARKER):\n"
        "            open(MARKER, 'w').close()\n"
        "            os._exit(7)\n"
        "    def on_turn_end(event, ctx):\n"
        "        raise ValueError('turn_end handler broke')\n"
        "    pi.on('tool_call', on_tool_call)\n"
        "    pi.on('turn_end', on_turn_end)\n"
    )
    scripted.script += [
        Reply(tool_calls=[ScriptToolCall(name="bash", arguments={"command": "echo first"})]),
        Reply(tool_calls=[ScriptToolCall(name="hello", arguments={"name": "again"})]),
        Reply(text="Still here."),
    ]
    result = await env.run(*MODEL, "-e", str(crashing), "-e", HELLO, "--mode", "json", "go")
    stderr = result.stderr.decode()
    assert result.returncode == 0, stderr
    events = [json.loads(line) for line in result.stdout.decode().splitlines()]
    errors = [e for e in events if e.get("type") == "extension_error"]
    # The crash: reported for the tool_call event; the bash call ran anyway.
    assert errors[0]["event"] == "tool_call" and "extension host process" in errors[0]["error"], errors
    # A handler that raises is reported with its extension and event, the session goes on.
    assert {"extensionPath": str(crashing), "event": "turn_end", "error": "ValueError: turn_end handler broke"} in [
        {k: e[k] for k in ("extensionPath", "event", "error")} for e in errors
    ]
    ends = ends_in_call_order(events)
    assert [e["toolName"] for e in ends] == ["bash", "hello"]
    # The restarted host serves the extension tool.
    assert "".join(b["text"] for b in ends[1]["result"]["content"]) == "hello again"
    assert "extension host process exited with code 7; restarting it" in stderr or "restarting it" in stderr, stderr
    assert events[-1]["type"] == "agent_end"


NOTES = (
    "def register(pi):\n"
    "    async def remember(args, ctx):\n"
    "        await pi.send_message({'customType': 'note', 'content': args, 'display': True})\n"
    "        await pi.append_entry('note-state', {'last': args})\n"
    "    pi.register_command('remember', description='Keep a note in the context', handler=remember)\n"
)


async def test_rpc_runs_an_extension_tool_and_ctx_ui_confirm_is_answered_by_the_client(scripted, env):
    victim = env.work / "victim"
    victim.mkdir()
    notes = env.work / "notes.py"
    notes.write_text(NOTES)
    scripted.script += [
        Reply(tool_calls=[
            ScriptToolCall(name="hello", arguments={"name": "Rpc"}),
            ScriptToolCall(name="bash", arguments={"command": f"rm -rf {victim}"}),
        ]),  # fmt: skip
        Reply(tool_calls=[ScriptToolCall(name="bash", arguments={"command": "curl http://127.0.0.1:9/"})]),
        Reply(text="All done."),
    ]
    proc = await trio.lowlevel.open_process(
        [str(Path(sys.executable).with_name("pi-actors")), *MODEL,
         "-e", HELLO, "-e", GATE, "-e", str(EXAMPLES / "custom_compaction.py"), "-e", str(notes),
         "-e", str(_provider_extension(env, scripted)), "--mode", "rpc"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env.env, cwd=env.work,
    )  # fmt: skip
    rpc = RpcClient(proc)
    try:
        await rpc.send({"id": "1", "type": "prompt", "message": "go"})
        first = await rpc.until(lambda o: o.get("type") == "extension_ui_request")
        assert {k: first[k] for k in ("method", "title", "message")} == {
            "method": "confirm", "title": "Allow this command?", "message": f"rm -rf {victim}"
        }
        await rpc.send({"type": "extension_ui_response", "id": first["id"], "confirmed": True})
        second = await rpc.until(lambda o: o.get("type") == "extension_ui_request")
        assert second["message"] == "curl http://127.0.0.1:9/"
        await rpc.send({"type": "extension_ui_response", "id": second["id"], "confirmed": False})
        await rpc.until(lambda o: o.get("type") == "agent_end")
        # A command of an extension writes a custom message into the session's context.
        await rpc.send({"id": "2", "type": "prompt", "message": "/remember the tests pass"})
        await rpc.until(lambda o: o.get("id") == "2")
        # The command runs after its prompt's response; the client hears of its message as pi's
        # message_start / message_end of a custom message.
        shown = await rpc.until(lambda o: o.get("type") == "message_end" and o["message"].get("role") == "custom")
        assert (shown["message"]["customType"], shown["message"]["content"]) == ("note", "the tests pass")
        started = [o for o in rpc.lines if o.get("type") == "message_start" and o["message"].get("role") == "custom"]
        assert [o["message"]["customType"] for o in started] == ["note"]
        messages = await rpc.request({"id": "3", "type": "get_messages"})
        custom = [m for m in messages["data"]["messages"] if m["role"] == "custom"]
        assert [(m["customType"], m["content"]) for m in custom] == [("note", "the tests pass")]
        # The extension's compaction is used instead of the model's summary.
        compacted = await rpc.request({"id": "4", "type": "compact"})
        assert compacted["success"], compacted
        assert compacted["data"]["summary"].startswith("The user asked, in order:"), compacted
        # get_commands lists the extension's command first, in pi's shape.
        listed = (await rpc.request({"id": "5", "type": "get_commands"}))["data"]["commands"]
        assert listed[0]["source"] == "extension"
        remember = next(c for c in listed if c["name"] == "remember")
        assert remember["sourceInfo"]["path"] == str(notes) and remember["sourceInfo"]["baseDir"] == str(env.work)
        # An extension's provider is among the available models, in the session's model list.
        models = (await rpc.request({"id": "6", "type": "get_available_models"}))["data"]["models"]
        assert {"provider": "extprov", "id": "ext-model"} in [{"provider": m["provider"], "id": m["id"]} for m in models]
    finally:
        await proc.stdin.aclose()
        with trio.fail_after(60):
            while await proc.stdout.receive_some():
                pass
            await proc.wait()
    ends = ends_in_call_order(rpc.lines)
    texts = ["".join(b.get("text", "") for b in e["result"]["content"]) for e in ends]
    assert texts[0] == "hello Rpc"
    assert not ends[1]["isError"] and not victim.exists()  # confirmed: it ran
    assert ends[2]["isError"] and texts[2] == "Blocked by the permission gate: curl http://127.0.0.1:9/"
    assert len(scripted.requests) == 3  # neither the command nor the compaction asked the model
    # A confirm answered is not answered twice: no error response was written.
    assert not [o for o in rpc.lines if o.get("type") == "response" and not o.get("success")]


def _provider_extension(env, scripted) -> Path:
    """An extension with a string and a boolean flag and a model provider (pi's config
    form) that points at the scripted server, its key in an environment variable."""
    path = env.work / "provider_ext.py"
    path.write_text(
        "def register(pi):\n"
        "    pi.register_flag('greeting', description='How to greet', type='string', default='hi')\n"
        "    pi.register_flag('loud', description='Shout', type='boolean', default=False)\n"
        "    pi.register_provider('extprov', {\n"
        f"        'baseUrl': {scripted.base_url_openai!r}, 'api': 'openai-completions', 'apiKey': 'EXTPROV_KEY',\n"
        "        'models': [{'id': 'ext-model', 'name': 'Ext Model', 'contextWindow': 64000, 'maxTokens': 2000}]})\n"
        "    def start(event, ctx):\n"
        "        return {'systemPrompt': event['systemPrompt'] + f\" FLAGS={pi.get_flag('greeting')}/{pi.get_flag('loud')}\"}\n"
        "    pi.on('before_agent_start', start)\n"
    )
    return path


async def test_extension_flags_reach_the_extension_and_its_provider_streams_a_run(scripted, env):
    ext = str(_provider_extension(env, scripted))
    env.env["EXTPROV_KEY"] = "ext-secret"
    # The provider's models are listed with the built-in ones.
    listed = await env.run("-e", ext, "--list-models", "ext-model")
    assert listed.returncode == 0, listed.stderr
    assert [line.split()[:4] for line in listed.stdout.decode().splitlines()[1:]] == [["extprov", "ext-model", "64K", "2K"]]
    # A typo of an extension's flag is still one line with the right hint (checked after loading).
    typo = await env.run("-e", ext, "--no-session", "--greting", "x", "-p", "hi")
    assert (typo.returncode, typo.stderr.decode()) == (1, "Error: unknown option --greting; did you mean --greeting?\n")
    missing = await env.run("-e", ext, "--no-session", "-p", "hi", "--greeting")
    assert missing.returncode == 1 and missing.stderr.decode().startswith("Error: extension flag --greeting needs a value")
    env.env["PI_ACTORS_EXTENSION_HOOK_TIMEOUT"] = "soon"
    bad = await env.run("-e", ext, "--no-session", "-p", "hi")
    assert (bad.returncode, bad.stderr.decode().splitlines()[-1]) == (
        1, "Error: PI_ACTORS_EXTENSION_HOOK_TIMEOUT must be a positive number of seconds, not 'soon'")
    del env.env["PI_ACTORS_EXTENSION_HOOK_TIMEOUT"]
    assert not scripted.requests
    # --model provider/id streams through the extension's provider; the flags reach get_flag,
    # and the words after them stay the prompt.
    scripted.script += [Reply(text="Through the extension.")]
    result = await env.run("-e", ext, "--no-session", "--model", "extprov/ext-model", "--greeting", "hello", "--loud", "-p", "say hi")
    assert (result.returncode, result.stdout.decode()) == (0, "Through the extension.\n"), result.stderr
    (request,) = scripted.requests
    assert request["headers"]["authorization"] == "Bearer ext-secret" and request["body"]["model"] == "ext-model"
    assert request["body"]["messages"][0]["content"].endswith(" FLAGS=hello/True")
    assert content_text(request["body"]["messages"][-1]["content"]) == "say hi"
