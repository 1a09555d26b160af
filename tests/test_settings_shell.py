"""Settings ``shellPath`` and ``shellCommandPrefix``: the bash tool's shell and a line run
before every command, for the model's bash calls and the user's ``!`` commands, through the
sandboxed tool workers; a shell that is not there is a clear tool error."""

from __future__ import annotations

import json
import subprocess

import pytest
import trio
from conftest import CLI
from support.rpc import RpcClient

from pi_actors.coding.tools import ToolError, run_tool
from pi_actors.testing.scripted_server import Reply
from pi_actors.testing.wire_formats import ScriptToolCall


async def test_shell_path_and_prefix_choose_how_bash_runs_and_a_missing_shell_is_a_tool_error(tmp_path):
    result = await run_tool(
        "bash", {"command": 'echo "$GREETING from $0"'}, cwd=str(tmp_path), shell_path="/bin/sh",
        shell_command_prefix="GREETING=hello",
    )  # fmt: skip
    assert result["content"][0]["text"].strip() == "hello from /bin/sh"
    with pytest.raises(ToolError) as missing:
        await run_tool("bash", {"command": "true"}, cwd=str(tmp_path), shell_path=str(tmp_path / "no-such-shell"))
    assert str(missing.value) == f"Custom shell path not found: {tmp_path / 'no-such-shell'}"


async def test_rpc_bash_and_the_models_bash_calls_use_the_shell_settings_in_the_sandbox(scripted, env):
    (env.home / "settings.json").write_text(json.dumps({"shellPath": "/bin/sh", "shellCommandPrefix": "GREETING=prefixed"}))
    scripted.script += [
        Reply(tool_calls=[ScriptToolCall(name="bash", arguments={"command": 'echo "model: $GREETING $0"'})]),
        Reply(text="done"),
    ]
    proc = await trio.lowlevel.open_process(
        [CLI, "--model", "scripted/scripted-model", "--mode", "rpc", "--no-session"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env.env, cwd=env.work,
    )  # fmt: skip
    rpc = RpcClient(proc)
    try:
        user = (await rpc.request({"id": "b", "type": "bash", "command": 'echo "user: $GREETING $0"'}))["data"]
        assert user["output"].strip() == "user: prefixed /bin/sh" and user["exitCode"] == 0
        await rpc.request({"id": "p", "type": "prompt", "message": "run it"})
        await rpc.until(lambda o: o.get("type") == "agent_end")
        end = next(o for o in rpc.lines if o["type"] == "tool_execution_end")
        assert end["result"]["content"][0]["text"].strip() == "model: prefixed /bin/sh"
    finally:
        await rpc.close()
