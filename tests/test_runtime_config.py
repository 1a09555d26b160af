"""The typed runtime configuration (``pi_actors.protocol.config``) and settings.json checks.

A mistyped setting is one ``Error:`` line naming the file and the key, through the real CLI;
the configuration's dict form (what crosses to the actor processes) reads back to the same
typed value, with the keys the actors have always read; a bad actor configuration is a
one-line error naming the key.
"""

from __future__ import annotations

import json
from typing import get_args, get_type_hints

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pi_actors.ai import types as T
from pi_actors.choices import SANDBOX_MODES, THINKING_LEVELS
from pi_actors.cli import ConfigError, load_settings, parse_settings
from pi_actors.cli.main import runtime_config
from pi_actors.protocol.config import (
    CoordinatorConfig,
    ProviderConfig,
    RetrySection,
    RuntimeConfig,
    Settings,
    ThinkingLevelName,
    ToolPoolConfig,
    read_part,
    set_fields,
)
from pi_actors.runtime import RestartPolicy

MODEL = T.Model(id="m", api="openai-completions", provider="p", base_url="http://127.0.0.1:1")


def _config(tmp_path, **kw):
    return runtime_config(
        model=MODEL, thinking="off", tools=["read"], cwd=str(tmp_path), system_prompt="", agent_dir=str(tmp_path / "agent"),
        runtime_keys={"p": "k"}, key_sources={"q": "$Q_KEY"}, sandbox="off", **kw,
    )  # fmt: skip


# -- through the CLI ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("settings_doc", "key"),
    [
        ({"retry": {"maxRetries": "3"}}, "retry.maxRetries"),
        ({"sandbox": {"memory": True}}, "sandbox.memory"),
        ({"sandbox": {"memroy": "1G"}}, "memroy"),
        ({"compaction": {"enabled": "yes"}}, "compaction.enabled"),
        ({"supervision": {"maxRestarts": 0}}, "supervision.maxRestarts"),
        ({"steeringMode": "sometimes"}, "steeringMode"),
    ],
)
async def test_a_mistyped_setting_stops_the_cli_with_one_error_line_naming_the_key(scripted, env, settings_doc, key):
    (env.home / "settings.json").write_text(json.dumps(settings_doc))
    done = await env.run("--model", "scripted/scripted-model", "--no-session", "-p", "hi")
    err = done.stderr.decode()
    assert done.returncode == 1, err
    assert err.count("\n") == 1 and err.startswith("Error: "), err
    assert key in err and str(env.home / "settings.json") in err, err
    assert "Traceback" not in err and not scripted.requests


async def test_a_mistyped_project_setting_names_the_project_file(scripted, env):
    (env.work / ".pi-actors").mkdir()
    (env.work / ".pi-actors" / "settings.json").write_text(json.dumps({"retry": {"enabled": 1}}))
    done = await env.run("--model", "scripted/scripted-model", "--no-session", "-p", "hi")
    err = done.stderr.decode()
    assert done.returncode == 1 and err.count("\n") == 1, err
    assert err.startswith(f"Error: {env.work / '.pi-actors' / 'settings.json'}: retry.enabled: Expected `bool"), err


# -- settings files -----------------------------------------------------------------------------


def test_settings_files_become_typed_sections_and_unset_fields_keep_the_code_defaults(tmp_path):
    home, work = tmp_path / "home", tmp_path / "work"
    (work / ".pi-actors").mkdir(parents=True)
    home.mkdir()
    (home / "settings.json").write_text(json.dumps({
        "retry": {"maxRetries": 7}, "supervision": {"restartWindow": 9.5, "spares": False}, "theme": "dark",
    }))  # fmt: skip
    (work / ".pi-actors" / "settings.json").write_text(json.dumps({"retry": {"enabled": False}, "toolExecution": "sequential"}))
    doc, warnings = load_settings(str(home), str(work))
    typed = parse_settings(doc)
    assert warnings == []
    assert typed.retry == RetrySection(enabled=False, max_retries=7)
    assert typed.tool_execution == "sequential" and typed.steering_mode == "one-at-a-time"
    assert RestartPolicy(**set_fields(typed.supervision)) == RestartPolicy(window=9.5, spares=False)


_json = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=12), inner, max_size=3),
    max_leaves=12,
)
_keys = st.sampled_from([
    "retry", "compaction", "supervision", "provider", "sandbox", "steeringMode", "followUpMode", "toolExecution",
    "defaultModel", "defaultThinkingLevel", "maxRetries", "memory", "homeAllow", "idleTimeoutMs", "restartWindow",
])  # fmt: skip
_settings_doc = st.dictionaries(_keys, _json | st.dictionaries(_keys, _json, max_size=4), max_size=5)


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(doc=_settings_doc)
def test_any_settings_document_loads_or_is_refused_with_one_line(tmp_path_factory, doc):
    home = tmp_path_factory.mktemp("home")
    (home / "settings.json").write_text(json.dumps(doc))
    try:
        loaded, warnings = load_settings(str(home), str(home / "nowhere"))
    except ConfigError as exc:
        assert "\n" not in str(exc) and str(home / "settings.json") in str(exc)
        return
    assert all("\n" not in w for w in warnings)
    assert isinstance(parse_settings(loaded), Settings)


# -- the configuration's wire form --------------------------------------------------------------


def test_the_configuration_crosses_to_the_actors_as_the_dict_they_always_read(tmp_path):
    config = _config(tmp_path, settings={"retry": {"maxDelayMs": 9000}, "supervision": {"heartbeatTimeout": 2}})
    doc = msgspec.to_builtins(config)
    assert doc["provider"]["runtime_api_keys"] == {"p": "k"} and doc["provider"]["api_key_sources"] == {"q": "$Q_KEY"}
    assert doc["provider"]["warm_api"] == "openai-completions"
    assert doc["provider"]["limits"] == {"maxRetryDelayMs": 9000}  # (defaults left out)
    assert doc["tools"]["warm_on_request"] is True and doc["tools"]["sandbox"]["mode"] == "off"
    coordinator = doc["coordinator"]
    assert coordinator["model"]["baseUrl"] == "http://127.0.0.1:1" and coordinator["session"]["agentDir"] == str(tmp_path / "agent")
    assert coordinator["settings"]["supervision"] == {"heartbeatTimeout": 2}
    assert msgspec.convert(doc, RuntimeConfig) == config
    assert read_part(doc["coordinator"], CoordinatorConfig) == config.coordinator
    assert read_part(doc["provider"], ProviderConfig).limits.max_retry_delay_ms == 9000


def test_a_bad_actor_configuration_is_one_line_naming_the_key():
    with pytest.raises(ValueError, match=r"^bad ToolPoolConfig configuration: Expected `int`, got `str` - at `\$.warm`$"):
        read_part({"warm": "two"}, ToolPoolConfig)
    assert read_part(None, ToolPoolConfig) == ToolPoolConfig()


def test_a_bad_sandbox_size_is_still_refused_with_its_reason(tmp_path):
    with pytest.raises(ConfigError, match=r"sandbox.memory: expected a positive size"):
        _config(tmp_path, settings={"sandbox": {"memory": "lots"}})


def test_the_thinking_levels_and_sandbox_modes_are_one_list_each():
    from pi_actors.cli import serve, tool_host
    from pi_actors.cli.main import build_parser
    from pi_actors.coding.sandbox import MODES
    from pi_actors.protocol.config import SandboxConfig

    def choices(parser, dest):
        return tuple(next(a for a in parser._actions if a.dest == dest).choices or ())

    literal, _none = get_args(get_type_hints(SandboxConfig)["mode"])
    assert MODES == SANDBOX_MODES == get_args(literal)
    for parser in (build_parser(), serve.build_parser(), tool_host.build_parser()):
        assert choices(parser, "sandbox") == SANDBOX_MODES
    assert choices(serve.build_parser(), "thinking") == THINKING_LEVELS

    assert THINKING_LEVELS == ("off", *get_args(T.ThinkingLevel)) == ("off", "minimal", "low", "medium", "high", "xhigh")
    assert get_args(ThinkingLevelName) == THINKING_LEVELS
    thinking = next(a for a in build_parser()._actions if a.dest == "thinking")
    assert tuple(thinking.choices or ()) == THINKING_LEVELS


def test_the_supervisor_and_an_unsandboxed_tool_drop_the_same_credential_names():
    from pi_actors.actors.local import secret_env_names
    from pi_actors.coding.sandbox.env import unsandboxed_environment

    env = {n: "x" for n in ("ANTHROPIC_BASE", "OPENAI_ORG", "GH_TOKEN", "DB_PASSWORD", "AWS_ACCESS_KEY_ID", "MY_API_KEY",
                            "PATH", "HOME", "TOKENIZERS_PARALLELISM", "KEYBOARD")}  # fmt: skip
    dropped = set(env) - set(unsandboxed_environment(env))
    assert set(secret_env_names(env)) == dropped
    assert dropped == {"ANTHROPIC_BASE", "OPENAI_ORG", "GH_TOKEN", "DB_PASSWORD", "AWS_ACCESS_KEY_ID", "MY_API_KEY"}
