"""Session commands through the actors: model, thinking level, new/switch session, names,
statistics, last text, and a user's ``!cmd``."""

from __future__ import annotations

import json

import pytest
from support.prompts import send_prompt
from support.wire import content_text

from pi_actors.actors import open_local_runtime
from pi_actors.ai import types as T
from pi_actors.cli.main import runtime_config
from pi_actors.runtime import RemoteError
from pi_actors.testing.scripted_server import Reply


class _Quiet:
    def event(self, event: dict) -> None:
        pass


def _config(server, tmp_path, *, session=True) -> dict:
    plain = T.Model(id="scripted-model", api="openai-completions", provider="scripted", base_url=server.base_url_openai)
    thinker = T.Model(id="scripted-thinker", api="openai-completions", provider="scripted", base_url=server.base_url_openai, reasoning=True)
    return runtime_config(
        model=plain,
        thinking="off",
        tools=["read", "bash"],
        cwd=str(tmp_path),
        system_prompt="commands test",
        agent_dir=str(tmp_path),
        session={"sessionDir": str(tmp_path / "sessions"), "agentDir": str(tmp_path)} if session else None,
        no_session=not session,
        settings={"retry": {"enabled": False}},
        models=[plain, thinker],
        runtime_keys={"scripted": "k"},
        key_sources={},
    )


def _lines(path) -> list[dict]:
    with open(path) as f:
        return [json.loads(line) for line in f]


async def test_set_model_and_thinking_level_apply_to_the_next_request_and_are_recorded(scripted, tmp_path):
    scripted.script += [Reply(text="plain"), Reply(text="thought about it")]
    async with open_local_runtime(_config(scripted, tmp_path)) as coordinator:
        await send_prompt(coordinator, "hi", _Quiet())
        with pytest.raises(RemoteError) as info:
            await coordinator.call("set_model", {"provider": "scripted", "modelId": "nope"})
        assert info.value.message == "Model not found: scripted/nope"
        # A model without reasoning keeps thinking off.
        assert (await coordinator.call("set_thinking_level", {"level": "high"}))["level"] == "off"
        model = await coordinator.call("set_model", {"provider": "scripted", "modelId": "scripted-thinker"})
        assert model["id"] == "scripted-thinker"
        assert (await coordinator.call("set_thinking_level", {"level": "xhigh"}))["level"] == "high"
        state = await coordinator.call("get_state")
        assert state["model"]["id"] == "scripted-thinker" and state["thinkingLevel"] == "high"
        await send_prompt(coordinator, "think", _Quiet())
        path = (await coordinator.call("session"))["path"]
    second = scripted.requests[1]["body"]
    assert second["model"] == "scripted-thinker" and second.get("reasoning_effort") == "high"
    kinds = [(e["type"], e.get("modelId") or e.get("thinkingLevel")) for e in _lines(path)[1:] if e["type"] != "message"]
    assert ("model_change", "scripted-thinker") in kinds and ("thinking_level_change", "high") in kinds


async def test_new_session_starts_an_empty_transcript_in_a_new_file(scripted, tmp_path):
    scripted.script += [Reply(text="old"), Reply(text="fresh")]
    async with open_local_runtime(_config(scripted, tmp_path)) as coordinator:
        await send_prompt(coordinator, "in the first session", _Quiet())
        first = (await coordinator.call("session"))["path"]
        result = await coordinator.call("new_session")
        assert result["cancelled"] is False and result["previousSessionFile"] == first
        assert (await coordinator.call("get_messages"))["messages"] == []
        await send_prompt(coordinator, "in the second", _Quiet())
        second = (await coordinator.call("session"))["path"]
        assert second != first
        # And back again.
        await coordinator.call("switch_session", {"sessionPath": first})
        messages = (await coordinator.call("get_messages"))["messages"]
        assert [content_text(m.get("content")) for m in messages if m["role"] == "user"] == ["in the first session"]
    assert len(scripted.requests[1]["body"]["messages"]) == 2  # system + the new prompt only


async def test_names_statistics_and_the_last_text(scripted, tmp_path):
    scripted.script += [Reply(text="an answer")]
    async with open_local_runtime(_config(scripted, tmp_path)) as coordinator:
        assert await coordinator.call("get_last_assistant_text") == {}
        await send_prompt(coordinator, "question", _Quiet())
        assert await coordinator.call("get_last_assistant_text") == {"text": "an answer"}
        with pytest.raises(RemoteError) as info:
            await coordinator.call("set_session_name", {"name": "   "})
        assert info.value.message == "Session name cannot be empty"
        await coordinator.call("set_session_name", {"name": "  my work  "})
        stats = await coordinator.call("get_session_stats")
        path = (await coordinator.call("session"))["path"]
    assert stats["userMessages"] == 1 and stats["assistantMessages"] == 1 and stats["totalMessages"] == 2
    assert stats["sessionFile"] == path and stats["tokens"]["input"] > 0
    assert _lines(path)[-1] == {**_lines(path)[-1], "type": "session_info", "name": "my work"}


async def test_a_users_bash_command_is_recorded_and_reaches_the_model_unless_excluded(scripted, tmp_path):
    scripted.script += [Reply(text="I saw it")]
    async with open_local_runtime(_config(scripted, tmp_path)) as coordinator:
        shown = await coordinator.call("bash", {"command": "echo visible; exit 3"})
        assert shown == {"output": "visible\n", "exitCode": 3, "cancelled": False, "truncated": False}
        await coordinator.call("bash", {"command": "echo secret", "excludeFromContext": True})
        await send_prompt(coordinator, "what did I run?", _Quiet())
    sent = [m["content"] if isinstance(m["content"], str) else m["content"][0]["text"] for m in scripted.requests[0]["body"]["messages"][1:]]
    assert sent[0].startswith("Ran `echo visible; exit 3`\n```\nvisible\n") and "Command exited with code 3" in sent[0]
    assert not any("secret" in text for text in sent)
