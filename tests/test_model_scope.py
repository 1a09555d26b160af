"""Model scoping (``--models``, settings ``enabledModels``, Ctrl+P / Shift+Ctrl+P, RPC
``cycle_model``) and a model's ``thinkingLevelMap`` limiting and clamping the thinking levels
(/thinking, Shift+Tab, RPC ``cycle_thinking_level``, ``--thinking``), as pi 0.73; the real-CLI
tests also check the settings a user notices in the same run (``hideThinkingBlock``,
``doubleEscapeAction``, ``shellPath``, ``shellCommandPrefix``)."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest
import trio
from conftest import CLI
from hypothesis import given, settings
from hypothesis import strategies as st
from support.rpc import RpcClient

from pi_actors.ai import clamp_thinking_level, get_model, supported_thinking_levels
from pi_actors.ai.types import Model
from pi_actors.cli.model_scope import cycle_target, parse_model_pattern, resolve_model_scope
from pi_actors.protocol.config import ScopedModel
from pi_actors.testing.scripted_server import Reply
from pi_actors.testing.wire_formats import ScriptToolCall

#: DeepSeek V4's map in pi-ai's catalog: only off, high and xhigh ("max") are offered.
DEEPSEEK_MAP = {"minimal": None, "low": None, "medium": None, "high": "high", "xhigh": "max"}


def _m(provider: str, model_id: str, name: str = "", **kw) -> Model:
    return Model(id=model_id, name=name or model_id, api="openai-completions", provider=provider, **kw)


MODELS = [
    _m("anthropic", "claude-sonnet-4-5", "Claude Sonnet 4.5"),
    _m("anthropic", "claude-sonnet-4-5-20250929", "Claude Sonnet 4.5 (dated)"),
    _m("anthropic", "claude-haiku-4-5-20251001", "Claude Haiku 4.5"),
    _m("anthropic", "claude-haiku-4-5-20250101", "Claude Haiku old"),
    _m("openai", "gpt-5", "GPT-5"),
    _m("openrouter", "qwen/qwen3:exacto", "Qwen exacto"),
]


# -- patterns --------------------------------------------------------------------------------


def test_globs_substrings_and_thinking_suffixes_resolve_as_pis_model_scope():
    scoped, warnings = resolve_model_scope(["anthropic/*sonnet*:high", "gpt-5", "HAIKU", "sonnet"], MODELS)
    assert [(s.provider, s.model_id, s.thinking_level) for s in scoped] == [
        ("anthropic", "claude-sonnet-4-5", "high"),
        ("anthropic", "claude-sonnet-4-5-20250929", "high"),
        ("openai", "gpt-5", None),
        # No alias among the haikus: the latest dated one.
        ("anthropic", "claude-haiku-4-5-20251001", None),
    ]  # "sonnet" named a model already in scope: no duplicate
    assert warnings == []
    # A glob matches the bare id too; a colon that is part of an id stays part of it.
    assert [s.model_id for s in resolve_model_scope(["*exacto"], MODELS)[0]] == ["qwen/qwen3:exacto"]
    assert parse_model_pattern("qwen/qwen3:exacto:low", MODELS)[:2] == (MODELS[5], "low")
    # Substrings prefer the alias over the dated id.
    assert parse_model_pattern("sonnet", MODELS)[0] is MODELS[0]


def test_a_pattern_matching_nothing_or_a_bad_level_is_a_warning_not_an_error():
    scoped, warnings = resolve_model_scope(["nothing-like-this", "zz*", "gpt-5:turbo"], MODELS)
    assert [(s.model_id, s.thinking_level) for s in scoped] == [("gpt-5", None)]
    assert warnings == [
        'Warning: No models match pattern "nothing-like-this"',
        'Warning: No models match pattern "zz*"',
        'Warning: Invalid thinking level "turbo" in pattern "gpt-5:turbo". Using default instead.',
    ]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(alphabet=st.sampled_from("ab*?[]:/-_.highlowx é\\"), max_size=14), max_size=5))
def test_hostile_patterns_never_raise_and_name_only_known_models(patterns):
    scoped, warnings = resolve_model_scope(patterns, MODELS)
    known = {(m.provider, m.id) for m in MODELS}
    assert all((s.provider, s.model_id) in known for s in scoped)
    assert len({(s.provider, s.model_id) for s in scoped}) == len(scoped)
    assert all(isinstance(w, str) and "\n" not in w for w in warnings)


# -- cycling ---------------------------------------------------------------------------------


def test_cycling_goes_forward_and_back_among_scoped_models_with_credentials_only():
    available = [{"provider": "a", "id": "one"}, {"provider": "a", "id": "two"}, {"provider": "b", "id": "three"}]
    scope = [ScopedModel(provider="b", model_id="three", thinking_level="high"), ScopedModel(provider="x", model_id="gone"),
             ScopedModel(provider="a", model_id="one")]  # fmt: skip
    assert cycle_target(scope, available, {"provider": "a", "id": "one"}) == (available[2], "high", True)
    assert cycle_target(scope, available, {"provider": "b", "id": "three"}) == (available[0], None, True)
    assert cycle_target(scope, available, {"provider": "b", "id": "three"}, backward=True) == (available[0], None, True)
    # Without a scope: every model with credentials, in order; a current model outside counts as the first.
    assert cycle_target([], available, {"provider": "a", "id": "two"}, backward=True) == (available[0], None, False)
    assert cycle_target([], available, {"provider": "z", "id": "?"}) == (available[1], None, False)
    # One candidate: nothing to cycle (pi: "Only one model in scope").
    assert cycle_target(scope[:2], available, {"provider": "b", "id": "three"}) is None
    assert cycle_target([], available[:1], {}) is None


# -- thinking levels -------------------------------------------------------------------------


def test_a_thinking_level_map_limits_the_levels_and_clamps_a_chosen_one_upwards_first():
    deepseek = get_model("deepseek", "deepseek-v4-pro")
    assert deepseek is not None and deepseek.thinking_level_map == DEEPSEEK_MAP  # the catalog's entry
    assert supported_thinking_levels(deepseek) == ["off", "high", "xhigh"]
    assert [clamp_thinking_level(deepseek, lv) for lv in ("off", "minimal", "low", "medium", "high", "xhigh")] == [
        "off", "high", "high", "high", "high", "xhigh",
    ]  # fmt: skip
    capped = _m("p", "m", reasoning=True, thinking_level_map={"xhigh": None, "high": None})
    assert supported_thinking_levels(capped) == ["off", "minimal", "low", "medium"]
    assert clamp_thinking_level(capped, "xhigh") == "medium"  # nothing above: the nearest below
    no_off = _m("p", "m", reasoning=True, thinking_level_map={"off": None})
    assert clamp_thinking_level(no_off, "off") == "minimal"
    assert supported_thinking_levels(_m("p", "m")) == ["off"]
    assert supported_thinking_levels(_m("p", "m", reasoning=True)) == ["off", "minimal", "low", "medium", "high"]


# -- through the real CLI ------------------------------------------------------------------------


def _with_deep_model(env) -> None:
    """Add ``scripted/deep-think``: a reasoning model with DeepSeek V4's level map."""
    path = env.home / "models.json"
    doc = json.loads(path.read_text())
    doc["providers"]["scripted"]["models"].append({"id": "deep-think", "reasoning": True, "thinkingLevelMap": DEEPSEEK_MAP})
    path.write_text(json.dumps(doc))


async def test_rpc_cycle_model_follows_the_scope_levels_follow_the_map_and_bash_the_shell_settings(scripted, env, tmp_path):
    _with_deep_model(env)
    (env.home / "settings.json").write_text(json.dumps({"shellPath": "/bin/sh", "shellCommandPrefix": "GREETING=prefixed"}))
    scripted.script += [
        Reply(tool_calls=[ScriptToolCall(name="bash", arguments={"command": 'echo "model: $GREETING $0"'})]),
        Reply(text="done"),
    ]
    errors = tmp_path / "stderr.txt"
    with errors.open("wb") as err:
        proc = await trio.lowlevel.open_process(
            [CLI, "--models", "deep*:low,scripted-model,no-such-model", "--mode", "rpc", "--no-session"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, env=env.env, cwd=env.work,
        )  # fmt: skip
    rpc = RpcClient(proc)
    try:
        # No --model: the session starts on the first scoped model, its ":low" clamped by the map.
        state = (await rpc.request({"id": "s", "type": "get_state"}))["data"]
        assert (state["model"]["id"], state["thinkingLevel"]) == ("deep-think", "high")
        cycled = (await rpc.request({"id": "c1", "type": "cycle_model"}))["data"]
        assert (cycled["model"]["id"], cycled["thinkingLevel"], cycled["isScoped"]) == ("scripted-model", "off", True)
        cycled = (await rpc.request({"id": "c2", "type": "cycle_model"}))["data"]  # round: scripted-claude is out of scope
        assert (cycled["model"]["id"], cycled["thinkingLevel"]) == ("deep-think", "high")
        # cycle_thinking_level offers only the levels the map leaves: high -> xhigh -> off -> high.
        seen = [(await rpc.request({"id": f"t{i}", "type": "cycle_thinking_level"}))["data"]["level"] for i in range(3)]
        assert seen == ["xhigh", "off", "high"]
        await rpc.request({"id": "l", "type": "set_thinking_level", "level": "minimal"})
        assert (await rpc.request({"id": "s2", "type": "get_state"}))["data"]["thinkingLevel"] == "high"
        # Settings shellPath / shellCommandPrefix: the user's bash and the model's bash calls
        # run "/bin/sh -c" with the prefix line first, in the sandboxed workers.
        user = (await rpc.request({"id": "b", "type": "bash", "command": 'echo "user: $GREETING $0"'}))["data"]
        assert user["output"].strip() == "user: prefixed /bin/sh" and user["exitCode"] == 0
        await rpc.request({"id": "p", "type": "prompt", "message": "run it"})
        await rpc.until(lambda o: o.get("type") == "agent_end")
        end = next(o for o in rpc.lines if o["type"] == "tool_execution_end")
        assert end["result"]["content"][0]["text"].strip() == "model: prefixed /bin/sh"
    finally:
        await rpc.close()
    assert 'Warning: No models match pattern "no-such-model"' in errors.read_text()


tmux = pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")


@tmux
async def test_the_tui_cycles_scoped_models_with_ctrl_p_and_applies_thinking_and_escape_settings(scripted, env, pane):
    _with_deep_model(env)
    (env.home / "settings.json").write_text(json.dumps({"hideThinkingBlock": True, "doubleEscapeAction": "fork"}))
    scripted.script.append(Reply(thinking="Secret deliberation here.", text="The answer is 42."))
    await pane.start("--models", "scripted-model,scripted/deep-think:low")
    # Ctrl+P: the next scoped model, its ":low" clamped by its thinkingLevelMap.
    await pane.keys("C-p")
    await pane.wait_for("Switched to deep-think (thinking: high)", "deep-think • high")  # status and footer
    await pane.keys("BTab")  # Shift+Tab: the next level deep-think offers after high
    await pane.wait_for("Thinking level: xhigh")
    await pane.keys("BTab")
    await pane.wait_for("Thinking level: off", "deep-think • thinking off")
    await pane.keys("C-p")
    screen = await pane.wait_for("Switched to scripted-model", "(scripted) scripted-model")
    assert "(thinking:" not in screen.split("Switched to scripted-model", 1)[1].split("\n", 1)[0]
    # hideThinkingBlock: the thinking is collapsed from the start; Ctrl+T still shows it.
    await pane.type("question")
    await pane.keys("Enter")
    screen = await pane.wait_for_answer("The answer is 42.")
    assert "Thinking..." in screen and "Secret deliberation" not in screen
    await pane.keys("C-t")
    await pane.wait_for("Thinking blocks: shown", "Secret deliberation here.")
    await pane.keys("Escape", "Escape")  # doubleEscapeAction "fork": the fork selector, not the tree
    screen = await pane.wait_for("Fork from message")
    assert "Session tree" not in screen
    await pane.keys("Escape")
    await pane.wait_for_gone("Fork from message")
    # /scoped-models shows the session's scope (from --models) and changes it: Ctrl+P then
    # has one model left.
    await pane.type("/scoped-models")
    await pane.keys("Enter")
    await pane.wait_for("Scoped models")
    await pane.type("deep-think")
    await pane.wait_for("[x] scripted/deep-think")
    await pane.keys("Enter")
    await pane.wait_for("scripted/deep-think disabled")
    assert json.loads((env.home / "settings.json").read_text())["enabledModels"] == ["scripted/scripted-model"]
    await pane.keys("Escape")
    await pane.wait_for_gone("Scoped models")
    await pane.keys("C-p")
    await pane.wait_for("Only one model in scope")
