"""Small pieces of the ai layer: surrogates, env keys, costs, catalog, option helpers."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pi_actors import ai
from pi_actors.ai.options import extra_option


def test_lone_surrogates_are_removed_and_pairs_joined():
    assert ai.sanitize_surrogates("a\ud83db") == "ab"
    assert ai.sanitize_surrogates("a\ude00b") == "ab"
    assert ai.sanitize_surrogates("\ud83d\ude00") == "\U0001F600"
    assert ai.sanitize_surrogates("emoji \U0001F600 中文 ∑ “q”") == "emoji \U0001F600 中文 ∑ “q”"


@given(st.text())
def test_sanitized_text_always_encodes_as_utf8(text):
    ai.sanitize_surrogates(text).encode("utf-8")


@given(st.text(alphabet=st.characters(blacklist_categories=["Cs"])))
def test_text_without_surrogates_is_unchanged(text):
    assert ai.sanitize_surrogates(text) == text


def test_anthropic_oauth_token_wins_over_api_key(monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "key")
    monkeypatch.setenv("ANTHROPIC_OAUTH_TOKEN", "oauth")
    assert ai.get_env_api_key("anthropic") == "oauth"
    monkeypatch.delenv("ANTHROPIC_OAUTH_TOKEN")
    assert ai.get_env_api_key("anthropic") == "key"


@pytest.mark.parametrize(("provider", "var"), [("openai", "OPENAI_API_KEY"), ("groq", "GROQ_API_KEY"),
                                               ("opencode-go", "OPENCODE_API_KEY"), ("huggingface", "HF_TOKEN")])
def test_simple_env_key_map(monkeypatch, provider, var):
    monkeypatch.setenv(var, "v")
    assert ai.get_env_api_key(provider) == "v"
    monkeypatch.setenv(var, "")
    assert ai.get_env_api_key(provider) is None


def test_unknown_and_oauth_only_providers_have_no_env_key():
    assert ai.get_env_api_key("nope") is None
    assert ai.get_env_api_key("openai-codex") is None


def test_bedrock_ambient_credentials_give_the_sentinel(monkeypatch):
    for var in ("AWS_PROFILE", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_BEARER_TOKEN_BEDROCK",
                "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI",
                "AWS_WEB_IDENTITY_TOKEN_FILE"):
        monkeypatch.delenv(var, raising=False)
    assert ai.get_env_api_key("amazon-bedrock") is None
    monkeypatch.setenv("AWS_PROFILE", "dev")
    assert ai.get_env_api_key("amazon-bedrock") == "<authenticated>"


def test_calculate_cost_mutates_usage_in_place():
    model = ai.Model(id="m", api="x", provider="p", cost=ai.ModelCost(input=3, output=15, cache_read=0.3,
                                                                      cache_write=3.75))
    usage = ai.Usage(input=1_000_000, output=2_000, cache_read=10_000, cache_write=100)
    cost = ai.calculate_cost(model, usage)
    assert cost is usage.cost
    assert cost.input == pytest.approx(3) and cost.output == pytest.approx(0.03)
    assert cost.total == pytest.approx(3 + 0.03 + 0.003 + 0.000375)


def test_catalog_lookups_return_independent_copies():
    assert {"anthropic", "openai"} <= set(ai.get_providers())
    sonnet = ai.get_model("anthropic", "claude-sonnet-4-5")
    assert sonnet is not None and sonnet.api == "anthropic-messages" and sonnet.cost.input > 0
    sonnet.cost.input = 0
    assert ai.get_model("anthropic", "claude-sonnet-4-5").cost.input > 0
    assert ai.get_model("anthropic", "nope") is None and ai.get_models("nope") == []
    for model in ai.get_models("openai") + ai.get_models("anthropic"):
        assert model.context_window > 0 and model.max_tokens > 0 and model.base_url.startswith("https://")


def test_models_are_equal_compares_id_and_provider():
    a = ai.get_model("openai", "gpt-5")
    assert ai.models_are_equal(a, ai.get_model("openai", "gpt-5"))
    assert not ai.models_are_equal(a, None)
    assert not ai.models_are_equal(a, ai.get_model("openai", "gpt-5-mini"))


def test_supports_xhigh():
    assert ai.supports_xhigh(ai.get_model("anthropic", "claude-opus-4-6"))
    assert not ai.supports_xhigh(ai.get_model("anthropic", "claude-sonnet-4-5"))
    assert ai.supports_xhigh(ai.get_model("openai", "gpt-5.2"))


def test_thinking_budget_adjustment_matches_pi():
    assert ai.adjust_max_tokens_for_thinking(32000, 64000, "medium") == (40192, 8192)
    assert ai.adjust_max_tokens_for_thinking(32000, 64000, "xhigh") == (48384, 16384)
    assert ai.adjust_max_tokens_for_thinking(1000, 2000, "high") == (2000, 976)
    assert ai.adjust_max_tokens_for_thinking(100, 1000, "low") == (1000, 0)
    assert ai.adjust_max_tokens_for_thinking(32000, 64000, "low", {"low": 5000}) == (37000, 5000)


def test_base_options_default_max_tokens_and_never_mutate_the_input():
    model = ai.Model(id="m", api="x", provider="p", max_tokens=64000)
    given_options = ai.StreamOptions(max_tokens=0, extra={"a": 1})
    base = ai.build_base_options(model, given_options, "key")
    assert base.max_tokens == 32000 and base.api_key == "key"
    base.extra["b"] = 2
    assert given_options.extra == {"a": 1} and given_options.api_key is None


def test_extra_options_accept_snake_and_camel_case():
    assert extra_option(ai.StreamOptions(extra={"toolChoice": "auto"}), "tool_choice") == "auto"
    assert extra_option(ai.StreamOptions(extra={"tool_choice": "any"}), "tool_choice") == "any"
    assert extra_option(None, "tool_choice", "d") == "d"


def test_stream_options_round_trip_in_camel_case():
    options = ai.StreamOptions(api_key="k", max_tokens=5, session_id="s", reasoning="low", extra={"effort": "high"})
    plain = ai.to_plain(options)
    assert plain == {"apiKey": "k", "maxTokens": 5, "sessionId": "s", "reasoning": "low", "extra": {"effort": "high"}}
    import msgspec

    assert msgspec.convert(plain, ai.StreamOptions) == options
