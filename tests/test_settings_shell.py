"""Settings ``shellPath`` and ``shellCommandPrefix``: the bash tool's shell and a line run
before every command, for the model's bash calls and the user's ``!`` commands, through the
sandboxed tool workers (through the real CLI: tests/test_model_scope.py's RPC test); a shell
that is not there is a clear tool error."""

from __future__ import annotations

import pytest

from pi_actors.coding.tools import ToolError, run_tool


async def test_shell_path_and_prefix_choose_how_bash_runs_and_a_missing_shell_is_a_tool_error(tmp_path):
    result = await run_tool(
        "bash", {"command": 'echo "$GREETING from $0"'}, cwd=str(tmp_path), shell_path="/bin/sh",
        shell_command_prefix="GREETING=hello",
    )  # fmt: skip
    assert result["content"][0]["text"].strip() == "hello from /bin/sh"
    with pytest.raises(ToolError) as missing:
        await run_tool("bash", {"command": "true"}, cwd=str(tmp_path), shell_path=str(tmp_path / "no-such-shell"))
    assert str(missing.value) == f"Custom shell path not found: {tmp_path / 'no-such-shell'}"
