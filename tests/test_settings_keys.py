"""pi's settings keys that apply to what pi-actors has: thinkingBudgets and sessionDir reach a
real run, retry.provider.maxRetryDelayMs caps a server-requested delay, and every new key of
the wrong type is refused with one line naming the file and the key."""

from __future__ import annotations

import json

import pytest
from conftest import _models_json

from pi_actors.cli import ConfigError, load_settings, parse_settings, stream_limits
from pi_actors.testing.scripted_server import Reply


async def test_thinking_budgets_and_session_dir_from_settings_reach_a_real_run(scripted, env):
    models = _models_json(scripted)
    models["providers"]["scripted-anthropic"]["models"] = [{"id": "scripted-claude", "reasoning": True}]
    (env.home / "models.json").write_text(json.dumps(models))
    (env.home / "settings.json").write_text(json.dumps({"thinkingBudgets": {"low": 2345}, "sessionDir": "kept-sessions"}))
    scripted.script.append(Reply(text="Thought briefly."))
    done = await env.run("--model", "scripted-anthropic/scripted-claude", "--thinking", "low", "-p", "hi")
    assert done.returncode == 0, done.stderr.decode()
    assert scripted.requests[0]["body"]["thinking"] == {"type": "enabled", "budget_tokens": 2345}
    saved = list((env.work / "kept-sessions").glob("*.jsonl"))
    assert len(saved) == 1 and "Thought briefly." in saved[0].read_text()


def test_retry_provider_max_retry_delay_caps_the_wait_for_a_server_requested_delay():
    assert stream_limits({"retry": {"maxDelayMs": 9000}}).max_retry_delay_ms == 9000
    assert stream_limits({"retry": {"maxDelayMs": 9000, "provider": {"maxRetryDelayMs": 0}}}).max_retry_delay_ms == 0
    typed = parse_settings({"retry": {"provider": {"timeoutMs": 5, "maxRetries": 1, "maxRetryDelayMs": 7}}})
    assert typed.retry.provider and typed.retry.provider.max_retry_delay_ms == 7


@pytest.mark.parametrize(("doc", "key"), [
    ({"thinkingBudgets": {"low": "many"}}, "thinkingBudgets.low"),
    ({"hideThinkingBlock": "yes"}, "hideThinkingBlock"),
    ({"retry": {"provider": {"maxRetryDelayMs": -1}}}, "retry.provider.maxRetryDelayMs"),
    ({"shellPath": 3}, "shellPath"),
    ({"shellCommandPrefix": ["shopt"]}, "shellCommandPrefix"),
    ({"sessionDir": False}, "sessionDir"),
])
def test_a_new_settings_key_of_the_wrong_type_is_one_line_naming_the_file_and_the_key(tmp_path, doc, key):
    (tmp_path / "settings.json").write_text(json.dumps(doc))
    with pytest.raises(ConfigError) as caught:
        load_settings(str(tmp_path), str(tmp_path / "nowhere"))
    message = str(caught.value)
    assert str(tmp_path / "settings.json") in message and key in message and "\n" not in message
