"""The full model catalog (pi-ai 0.73.1's providers and models as data), the credentials that
decide which of its models a user is offered, and the OpenAI-compatible providers reached by
name with their environment variable and compat settings."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import msgspec
import pytest
from conftest import CLI
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.providers import run

from pi_actors import ai
from pi_actors.ai import catalog
from pi_actors.ai.env_keys import ENV_KEY_VARIABLES, credential_hint
from pi_actors.cli import DEFAULT_MODEL_IDS, ConfigError, choose_model, load_model_registry, parse_settings
from pi_actors.cli.main import _implied_model, _unrestorable
from pi_actors.testing import Reply

APIS = {"anthropic-messages", "openai-responses", "openai-completions", "azure-openai-responses", "openai-codex-responses",
        "google-generative-ai", "google-vertex", "bedrock-converse-stream", "mistral-conversations", "google-gemini-cli"}

#: Every variable that gives some provider credentials (cleared so the tests see only their own).
_CREDENTIAL_VARS = {name for names in ENV_KEY_VARIABLES.values() for name in names} | {
    "GOOGLE_CLOUD_API_KEY", "GOOGLE_CLOUD_PROJECT", "GCLOUD_PROJECT", "GOOGLE_CLOUD_LOCATION", "AWS_PROFILE",
    "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_BEARER_TOKEN_BEDROCK", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_WEB_IDENTITY_TOKEN_FILE",
}


@pytest.fixture
def no_keys(monkeypatch, tmp_path):
    """No credentials in the environment, and an empty agent directory."""
    for name in _CREDENTIAL_VARS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PI_ACTORS_DIR", str(tmp_path))
    return monkeypatch


def _clean_env(home, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _CREDENTIAL_VARS}
    return {**env, "PI_ACTORS_DIR": str(home), **extra}


# --- the data ---------------------------------------------------------------------------------


def test_the_catalog_holds_every_provider_and_model_pi_ai_ships_with_all_their_fields():
    with open(catalog.CATALOG_PATH, "rb") as f:
        doc = json.load(f)
    assert doc["source"] == "@mariozechner/pi-ai 0.73.1"
    models = ai.builtin_models()
    # pi-ai 0.73.1's 969 models of 31 providers, then the Code Assist ones of pi-ai 0.70.6
    [added] = doc["added"]
    assert added["source"].startswith("@mariozechner/pi-ai 0.70.6") and len(added["models"]) == 16
    assert {m["provider"] for m in added["models"]} == {"google-gemini-cli", "google-antigravity"}
    assert len(models) == 969 + 16 and len(ai.get_providers()) == 31 + 2
    assert {m.api for m in models} == APIS
    for raw, m in zip(doc["models"] + added["models"], models, strict=True):
        # every field pi-ai has survives the round trip through our Model
        assert {k: v for k, v in msgspec.to_builtins(m).items() if v is not None} == raw
        assert m.id and m.name and m.provider and m.context_window > 0 and m.max_tokens > 0
        assert set(m.input) <= {"text", "image"} and "text" in m.input
        assert m.cost.input >= 0 or m.id == "openrouter/auto"  # pi-ai's "price unknown": -1000000
    groq = ai.get_model("groq", "openai/gpt-oss-120b")
    assert groq and groq.api == "openai-completions" and groq.base_url == "https://api.groq.com/openai/v1" and groq.reasoning
    assert ai.get_model("deepseek", "deepseek-v4-pro").compat["requiresReasoningContentOnAssistantMessages"] is True
    assert any(m.thinking_level_map for m in models) and any(m.headers for m in models)
    # the defaults pi picks for each provider are in it; every provider says how to get credentials
    for provider in ai.get_providers():
        assert ai.get_model(provider, DEFAULT_MODEL_IDS[provider]) is not None, provider
        assert credential_hint(provider) != "give the provider an apiKey in models.json", provider
    # copies: changing one leaves the catalog as it was
    groq.compat = {"x": 1}
    assert ai.get_model("groq", "openai/gpt-oss-120b").compat is None


def test_importing_the_ai_layer_does_not_read_the_catalog():
    code = ("import pi_actors.ai, pi_actors.ai.catalog as c, sys; "
            "print(c._raw is None and c._by_provider is None, len(c.get_providers()), c._raw is not None)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["True", "33", "True"]


@pytest.mark.parametrize(("text", "where"), [
    (b'{"source": "x", "models": [{"id": "m", "api": "a", "provider": "p", "contextWindow": "big"}]}',
     "$.models[0].contextWindow"),
    (b'{"source": "x", "models": [{"id": "m", "api": "a"}]}', "provider"),
    (b'{"source": "x", "models": [{"id": "m", "api": "a", "provider": "p"}, {"id": "m", "api": "b", "provider": "p"}]}',
     "repeats p/m"),
    (b'{"models": []', "malformed"),
])
def test_a_malformed_catalog_entry_is_one_line_naming_the_file_and_the_place(text, where):
    with pytest.raises(catalog.CatalogError) as caught:
        catalog.parse_catalog(text, "/pkg/catalog.json")
    message = str(caught.value)
    assert message.startswith("/pkg/catalog.json: malformed model catalog") and where in message and "\n" not in message


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(
    st.binary(max_size=200),
    st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
                 lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
                 max_leaves=12).map(lambda v: json.dumps({"source": "s", "models": [v]}).encode()),
))
def test_hostile_catalog_bytes_give_models_or_one_catalog_error(data):
    try:
        models = catalog.parse_catalog(data, "c.json")
    except catalog.CatalogError as exc:
        assert str(exc).startswith("c.json: ") and "\n" not in str(exc)
    else:
        assert all(isinstance(m, ai.Model) and m.id and m.provider and m.api for m in models)


# --- credentials decide what is offered -------------------------------------------------------


def test_only_providers_with_credentials_are_offered_and_choosing_another_says_what_to_set(no_keys, tmp_path):
    reg = load_model_registry(str(tmp_path))
    assert reg.available() == []
    with pytest.raises(ConfigError, match=r"^No models available\. Set a provider's API key variable \(ANTHROPIC_API_KEY"):
        choose_model(reg, provider=None, model=None, api_key=None)
    with pytest.raises(ConfigError) as caught:
        choose_model(reg, provider=None, model="groq/openai/gpt-oss-120b", api_key=None)
    assert str(caught.value) == f"No API key found for groq: set GROQ_API_KEY, or give it an apiKey in {tmp_path}/models.json"
    with pytest.raises(ConfigError, match=r"^No API key found for anthropic: set ANTHROPIC_OAUTH_TOKEN or ANTHROPIC_API_KEY"):
        choose_model(reg, provider="anthropic", model=None, api_key=None)
    # Bedrock is served now: without AWS credentials it says which to set
    with pytest.raises(ConfigError) as caught:
        choose_model(reg, provider=None, model="amazon-bedrock/amazon.nova-pro-v1:0", api_key=None)
    assert str(caught.value).startswith("No API key found for amazon-bedrock: set AWS_PROFILE, AWS_ACCESS_KEY_ID and "
                                        "AWS_SECRET_ACCESS_KEY, or AWS_BEARER_TOKEN_BEDROCK")
    # --api-key is credentials for the chosen model's provider
    assert choose_model(reg, provider=None, model="groq/openai/gpt-oss-120b", api_key="k").model.provider == "groq"

    no_keys.setenv("GROQ_API_KEY", "g")
    no_keys.setenv("AWS_PROFILE", "default")  # bedrock has credentials: first in pi's provider order
    reg = load_model_registry(str(tmp_path))
    available = reg.available()
    assert {m.provider for m in available} == {"groq", "amazon-bedrock"}
    assert len([m for m in available if m.provider == "groq"]) == 18
    choice = choose_model(reg, provider=None, model=None, api_key=None)
    assert (choice.model.provider, choice.model.id) == ("amazon-bedrock", "us.anthropic.claude-opus-4-6-v1")
    # the session's own model stays offered even when its key came from --api-key
    chosen = ai.get_model("xai", "grok-4")
    assert chosen and available + [chosen] == reg.available(keep=(chosen,))
    no_keys.delenv("AWS_PROFILE")
    choice = choose_model(load_model_registry(str(tmp_path)), provider=None, model=None, api_key=None)
    assert (choice.model.provider, choice.model.id) == ("groq", "openai/gpt-oss-120b")  # pi's default for groq


def test_list_models_shows_only_models_with_credentials_as_pi_does(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    none = subprocess.run([CLI, "--list-models"], capture_output=True, text=True, env=_clean_env(home), timeout=60)
    assert none.returncode == 0 and none.stdout.startswith("No models available. Set a provider's API key variable")
    assert str(home / "models.json") in none.stdout
    listed = subprocess.run([CLI, "--list-models", "gpt-oss"], capture_output=True, text=True, timeout=60,
                            env=_clean_env(home, GROQ_API_KEY="g", CEREBRAS_API_KEY="c"))
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert lines[0].split() == ["provider", "model", "context", "max-out", "thinking", "images"]
    rows = [line.split() for line in lines[1:]]
    assert rows and {r[0] for r in rows} == {"cerebras", "groq"} and rows == sorted(rows, key=lambda r: (r[0], r[1]))
    assert ["groq", "openai/gpt-oss-120b", "131.1K", "65.5K", "yes", "no"] in rows
    chosen = subprocess.run([CLI, "--model", "deepseek/deepseek-v4-pro", "-p", "hi"], capture_output=True, text=True,
                            timeout=60, env=_clean_env(home))
    assert chosen.returncode == 1
    assert chosen.stderr.strip() == (f"Error: No API key found for deepseek: set DEEPSEEK_API_KEY, or give it an apiKey in "
                                     f"{home}/models.json")


# --- models.json: pi's remaining fields ------------------------------------------------------


def _read(tmp_path, providers: dict) -> ai.ModelsJson:
    path = tmp_path / "models.json"
    path.write_text(json.dumps({"providers": providers}))
    return ai.read_models_json(str(path))


def test_models_json_takes_pis_thinking_level_map_and_compat_fields(tmp_path):
    cfg = _read(tmp_path, {
        "local": {"baseUrl": "http://h", "apiKey": "k", "api": "openai-completions",
                  "compat": {"thinkingFormat": "deepseek", "cacheControlFormat": "anthropic",
                             "requiresReasoningContentOnAssistantMessages": True, "supportsLongCacheRetention": False},
                  "models": [{"id": "m", "reasoning": True, "thinkingLevelMap": {"off": None, "xhigh": "max"},
                              "compat": {"supportsEagerToolInputStreaming": False, "someFutureKey": 3}}]},
        "deepseek": {"modelOverrides": {"deepseek-v4-pro": {"thinkingLevelMap": {"low": "minimal"}}}},
    })
    assert cfg.errors == []
    model = cfg.models[0]
    assert model.thinking_level_map == {"off": None, "xhigh": "max"}
    assert model.compat == {"thinkingFormat": "deepseek", "cacheControlFormat": "anthropic",
                            "requiresReasoningContentOnAssistantMessages": True, "supportsLongCacheRetention": False,
                            "supportsEagerToolInputStreaming": False, "someFutureKey": 3}
    merged = {(m.provider, m.id): m for m in ai.merge_models(ai.builtin_models(), cfg)}
    builtin = ai.get_model("deepseek", "deepseek-v4-pro").thinking_level_map or {}
    assert merged[("deepseek", "deepseek-v4-pro")].thinking_level_map == {**builtin, "low": "minimal"}


@pytest.mark.parametrize(("providers", "where"), [
    ({"p": {"baseUrl": "u", "apiKey": "k", "api": "openai-completions", "compat": {"thinkingFormat": "bogus"}}},
     "providers.p.compat: Invalid enum value 'bogus' - at `$.thinkingFormat`"),
    ({"p": {"baseUrl": "u", "apiKey": "k", "api": "openai-completions",
            "models": [{"id": "m", "compat": {"supportsLongCacheRetention": "yes"}}]}},
     "providers.p.models[0].compat: Expected `bool | null`, got `str` - at `$.supportsLongCacheRetention`"),
    ({"p": {"baseUrl": "u", "apiKey": "k", "api": "openai-completions",
            "models": [{"id": "m", "thinkingLevelMap": {"extreme": "max"}}]}},
     'providers.p.models[0] (m).thinkingLevelMap: unknown thinking level "extreme"'),
    ({"deepseek": {"modelOverrides": {"deepseek-v4-pro": {"thinkingLevelMap": {"high": 3}}}}},
     "providers.deepseek.modelOverrides.deepseek-v4-pro.thinkingLevelMap.high must be a string or null"),
    ({"groq": {"compat": {"cacheControlFormat": "openai"}}}, "providers.groq.compat: Invalid enum value 'openai'"),
])
def test_a_bad_new_models_json_field_is_one_line_naming_the_file(tmp_path, providers, where):
    cfg = _read(tmp_path, providers)
    assert cfg.models == [] and len(cfg.errors) == 1
    assert cfg.errors[0].startswith(f"{tmp_path / 'models.json'}: {where}") and "\n" not in cfg.errors[0]


# --- OpenAI-compatible providers by name -----------------------------------------------------


async def test_an_openai_compatible_provider_works_by_name_with_its_key_variable_and_compat(scripted, tmp_path):
    """deepseek from the catalog through the real CLI, with only its base URL pointed at the
    scripted server: the key comes from DEEPSEEK_API_KEY and the requests carry its compat."""
    import trio

    home = tmp_path / "home"
    home.mkdir()
    (home / "models.json").write_text(json.dumps({"providers": {"deepseek": {"baseUrl": scripted.base_url_openai}}}))
    scripted.script.extend([Reply(text="first"), Reply(text="second")])
    with trio.fail_after(60):
        done = await trio.run_process(
            [CLI, "--no-session", "--provider", "deepseek", "--thinking", "xhigh", "-p", "one", "two"],
            capture_stdout=True, capture_stderr=True, check=False, cwd=str(tmp_path),
            env=_clean_env(home, DEEPSEEK_API_KEY="deepseek-key"))
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout.decode() == "second\n"  # -p prints the last answer
    first, second = scripted.requests
    assert first["headers"]["authorization"] == "Bearer deepseek-key" and first["body"]["model"] == "deepseek-v4-pro"
    # DeepSeek: no store, system role, its own thinking switch, reasoning_content on past turns,
    # and its thinkingLevelMap: xhigh is offered, as "max"
    assert "store" not in first["body"] and first["body"]["messages"][0]["role"] == "system"
    assert first["body"]["thinking"] == {"type": "enabled"} and first["body"]["reasoning_effort"] == "max"
    assistant = [m for m in second["body"]["messages"] if m["role"] == "assistant"]
    assert assistant == [{"role": "assistant", "content": "first", "reasoning_content": ""}]


async def test_groq_by_name_takes_its_key_from_groq_api_key(start_llm, no_keys):
    server = await start_llm([Reply(text="from groq")])
    no_keys.setenv("GROQ_API_KEY", "groq-key")
    groq = ai.get_model("groq", "openai/gpt-oss-120b")
    assert groq
    groq.base_url = server.base_url_openai
    result, _ = await run("openai-completions", server, ai.StreamOptions(reasoning="high"), model=groq, simple=True)
    assert result.stop_reason == "stop" and result.provider == "groq"
    request = server.requests[0]
    assert request["headers"]["authorization"] == "Bearer groq-key" and request["body"]["model"] == "openai/gpt-oss-120b"
    assert request["body"]["reasoning_effort"] == "high" and request["body"]["store"] is False


async def test_openrouter_and_moonshot_compat_reach_the_wire(start_llm):
    server = await start_llm([Reply(text="a"), Reply(text="b"), Reply(text="c")])
    options = ai.StreamOptions(api_key="k", reasoning="medium")
    claude = ai.get_model("openrouter", "anthropic/claude-sonnet-4.5")
    kimi = ai.get_model("moonshotai", "kimi-k2.6")
    assert claude and kimi
    claude.base_url = kimi.base_url = server.base_url_openai  # detection by provider name still applies
    off = msgspec.structs.replace(claude, thinking_level_map={"off": None})
    for model, opts in ((claude, options), (kimi, options), (off, ai.StreamOptions(api_key="k"))):
        result, _ = await run("openai-completions", server, opts, model=model, simple=True)
        assert result.stop_reason == "stop"
    routed, moonshot, unreasoned = (r["body"] for r in server.requests)
    assert routed["reasoning"] == {"effort": "medium"} and "reasoning_effort" not in routed
    assert routed["messages"][-1]["content"][-1]["cache_control"] == {"type": "ephemeral"}
    assert moonshot["max_tokens"] and "max_completion_tokens" not in moonshot and "store" not in moonshot
    assert "reasoning_effort" not in moonshot
    assert "reasoning" not in unreasoned  # thinkingLevelMap.off = null: OpenRouter gets no reasoning object


def test_a_resumed_sessions_model_without_credentials_is_not_restored(no_keys, tmp_path):
    reg = load_model_registry(str(tmp_path))
    saved = {"provider": "groq", "modelId": "openai/gpt-oss-120b"}
    implied = _implied_model(parse_settings(None), saved, reg.available())
    assert implied is None and _unrestorable(saved, implied, reg) == "groq/openai/gpt-oss-120b"
    no_keys.setenv("GROQ_API_KEY", "g")
    implied = _implied_model(parse_settings(None), saved, reg.available())
    assert implied == "groq/openai/gpt-oss-120b" and _unrestorable(saved, implied, reg) is None
    assert _unrestorable({"provider": "gone", "modelId": "x"}, None, reg) is None  # unknown: nothing to say


def test_regenerating_the_catalog_text_keeps_its_added_blocks_byte_for_byte():
    """scripts/generate_catalog.py rewrites pi-ai 0.73.1's models and keeps the ``added`` blocks
    (the Code Assist models of pi-ai 0.70.6) as they are: rendering the file's own content
    gives the file back, and it parses to the same models."""
    import importlib.util
    import os

    path = os.path.join(os.path.dirname(catalog.CATALOG_PATH), "..", "..", "scripts", "generate_catalog.py")
    spec = importlib.util.spec_from_file_location("generate_catalog", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with open(catalog.CATALOG_PATH, encoding="utf-8") as f:
        text = f.read()
    doc = json.loads(text)
    assert module.render(doc["source"], doc["models"], module._kept_blocks(catalog.CATALOG_PATH)) == text
    assert len(catalog.parse_catalog(text.encode(), "catalog")) == 969 + 16
