"""models.json in pi's format and config-value resolution."""

from __future__ import annotations

import json

from pi_actors import ai


def write(tmp_path, data) -> str:
    path = tmp_path / "models.json"
    path.write_text(json.dumps(data) if not isinstance(data, str) else data)
    return str(path)


def test_custom_models_get_pi_defaults_and_provider_settings(tmp_path, monkeypatch):
    monkeypatch.setenv("MY_TOKEN", "tok")
    path = write(tmp_path, {"providers": {"ollama": {
        "baseUrl": "http://localhost:11434/v1", "api": "openai-completions", "apiKey": "ollama",
        "headers": {"x-team": "MY_TOKEN"}, "compat": {"supportsDeveloperRole": False},
        "models": [{"id": "llama3"},
                   {"id": "qwen", "name": "Qwen", "reasoning": True, "input": ["text", "image"],
                    "cost": {"input": 1}, "contextWindow": 32000, "maxTokens": 4096,
                    "compat": {"thinkingFormat": "qwen"}}]}}})
    models, errors = ai.load_models_json(path)
    assert errors == []
    llama, qwen = models
    assert (llama.id, llama.name, llama.provider, llama.api, llama.base_url) == (
        "llama3", "llama3", "ollama", "openai-completions", "http://localhost:11434/v1")
    assert (llama.reasoning, llama.input, llama.context_window, llama.max_tokens) == (False, ["text"], 128000, 16384)
    assert llama.headers == {"x-team": "tok"} and llama.compat == {"supportsDeveloperRole": False}
    assert qwen.cost == ai.ModelCost(input=1) and qwen.context_window == 32000
    assert qwen.compat == {"supportsDeveloperRole": False, "thinkingFormat": "qwen"}
    cfg = ai.read_models_json(path)
    assert cfg.resolve_api_key("ollama") == "ollama"


def test_missing_file_is_empty_not_an_error(tmp_path):
    assert ai.load_models_json(str(tmp_path / "absent.json")) == ([], [])


def test_invalid_json_is_an_error(tmp_path):
    models, errors = ai.load_models_json(write(tmp_path, "{not json"))
    assert models == [] and "invalid JSON" in errors[0]


def test_any_validation_error_drops_all_custom_models(tmp_path):
    cases = [
        ({"good": {"baseUrl": "u", "apiKey": "k", "api": "openai-completions", "models": [{"id": "x"}]},
          "bad": {"apiKey": "k", "api": "openai-completions", "models": [{"id": "y"}]}}, "baseUrl is required"),
        ({"p": {"baseUrl": "u", "api": "openai-completions", "models": [{"id": "y"}]}}, "apiKey is required"),
        ({"p": {"baseUrl": "u", "apiKey": "k", "models": [{"id": "y"}]}}, "api is required"),
        ({"p": {"baseUrl": "u", "apiKey": "k", "api": "openai-completions", "models": [{"id": "y", "maxTokens": 0}]}},
         "maxTokens must be a positive integer"),
        ({"p": {"apiKey": "k"}}, "specify baseUrl"),
        ({"p": {"baseUrl": "u", "apiKey": "k", "api": "openai-completions", "models": [{"id": "y", "reasoning": "yes"}]}},
         "Expected `bool`"),
    ]
    for providers, message in cases:
        models, errors = ai.load_models_json(write(tmp_path, {"providers": providers}))
        assert models == [] and len(errors) == 1 and message in errors[0], (providers, errors)


def test_merge_overrides_builtins_and_replaces_same_ids(tmp_path):
    path = write(tmp_path, {"providers": {
        "anthropic": {"baseUrl": "https://proxy.example/anthropic",
                      "modelOverrides": {"claude-sonnet-4-5": {"cost": {"input": 99}, "maxTokens": 1000}}},
        "openai": {"baseUrl": "https://other/v1", "apiKey": "OPENAI_API_KEY", "api": "openai-completions",
                   "models": [{"id": "gpt-5", "name": "Mine"}, {"id": "brand-new"}]}}})
    cfg = ai.read_models_json(path)
    assert cfg.errors == []
    merged = {(m.provider, m.id): m for m in ai.merge_models(ai.builtin_models(), cfg)}
    sonnet = merged[("anthropic", "claude-sonnet-4-5")]
    assert sonnet.base_url == "https://proxy.example/anthropic"
    assert sonnet.cost.input == 99 and sonnet.cost.output == 15 and sonnet.max_tokens == 1000
    assert merged[("anthropic", "claude-haiku-4-5")].base_url == "https://proxy.example/anthropic"
    assert merged[("openai", "gpt-5")].name == "Mine"
    assert ("openai", "brand-new") in merged and ("openai", "gpt-4o") in merged


def test_resolve_config_value(monkeypatch):
    monkeypatch.setenv("SOME_VAR", "from-env")
    assert ai.resolve_config_value("SOME_VAR") == "from-env"
    assert ai.resolve_config_value("literal-key") == "literal-key"
    assert ai.resolve_config_value("!echo '  from command  '") == "from command"
    assert ai.resolve_config_value("!exit 3") is None
    assert ai.resolve_config_value("!echo once-$RANDOM") == ai.resolve_config_value("!echo once-$RANDOM")


def test_auth_header_adds_bearer_authorization(tmp_path):
    path = write(tmp_path, {"providers": {"p": {"baseUrl": "u", "apiKey": "secret", "api": "openai-completions", "authHeader": True,
                                                "models": [{"id": "m"}]}}})
    models, errors = ai.load_models_json(path)
    assert errors == [] and models[0].headers == {"Authorization": "Bearer secret"}
