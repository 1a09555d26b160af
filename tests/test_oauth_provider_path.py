"""A logged-in provider in use: the provider actor takes the key from
auth.json before the environment (pi's order), refreshes an expired login first, speaks to
Anthropic as pi does with an OAuth token, and turns a login that cannot be refreshed into one
error event telling the user to /login again."""

from __future__ import annotations

import urllib.request

import trio
from support.providers import call_stream, hello_context, plain_model, provider_peer

from pi_actors.ai import types as T
from pi_actors.ai.oauth import AuthStore, LoginIO, get_oauth_provider
from pi_actors.testing import Reply
from pi_actors.testing.oauth_server import OAuthServer


def _login(provider: str) -> dict:
    io = LoginIO(show=lambda url, _i: urllib.request.urlopen(url, timeout=10).read() if "127.0.0.1" in url else None,
                 sleep=lambda s: None, timeout=10)
    return get_oauth_provider(provider).login(io)


async def test_a_logged_in_anthropic_refreshes_then_streams_with_its_oauth_token_before_env_keys(start_llm, tmp_path,
                                                                                                monkeypatch):
    llm = await start_llm([Reply(text="hello from claude"), Reply(text="never sent")])
    with OAuthServer(expires_in=0) as oauth:
        monkeypatch.setenv("PI_ACTORS_OAUTH_URL", oauth.url)
        monkeypatch.setenv("PI_ACTORS_OAUTH_CALLBACK_PORT", "0")
        monkeypatch.setenv("PI_ACTORS_DIR", str(tmp_path))
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-from-env")
        monkeypatch.delenv("ANTHROPIC_OAUTH_TOKEN", raising=False)
        store = AuthStore(str(tmp_path / "auth.json"))
        store.set("anthropic", {"type": "oauth", **await trio.to_thread.run_sync(_login, "anthropic")})
        oauth.expires_in = 3600
        model = plain_model(llm, api="anthropic-messages", provider="anthropic")
        with trio.fail_after(30):
            async with provider_peer() as peer:
                _, final, _ = await call_stream(peer, {"model": model, "context": T.to_plain(hello_context())})
                assert final.stop_reason == "stop" and final.content[0].text == "hello from claude"
                # Now the login expires for good: its refresh token is revoked.
                entry = store.get("anthropic")
                store.set("anthropic", {**entry, "expires": 0})
                oauth.revoke_all()
                chunks, failed, _ = await call_stream(peer, {"model": model, "context": T.to_plain(hello_context())})
    fresh = store.get("anthropic")
    assert oauth.refreshes == 1
    request = llm.requests[0]
    assert request["headers"]["authorization"] == f"Bearer {fresh['access']}"
    assert "oauth-2025-04-20" in request["headers"]["anthropic-beta"]
    system = request["body"]["system"]
    assert system[0]["text"] == "You are Claude Code, Anthropic's official CLI for Claude."
    assert len(llm.requests) == 1  # the expired login never reached the model
    assert failed.stop_reason == "error" and "\n" not in failed.error_message
    assert failed.error_message.startswith("The anthropic login expired and could not be refreshed")
    assert failed.error_message.endswith("run /login anthropic again")
    assert [c["type"] for c in chunks] == ["error"]


async def test_a_logged_in_chatgpt_subscription_streams_codex_with_its_access_token_and_account(start_llm, tmp_path,
                                                                                               monkeypatch):
    from pi_actors.testing.oauth_server import ACCOUNT_ID

    llm = await start_llm([Reply(text="hello from codex")])
    with OAuthServer() as oauth:
        monkeypatch.setenv("PI_ACTORS_OAUTH_URL", oauth.url)
        monkeypatch.setenv("PI_ACTORS_OAUTH_CALLBACK_PORT", "0")
        monkeypatch.setenv("PI_ACTORS_DIR", str(tmp_path))
        store = AuthStore(str(tmp_path / "auth.json"))
        store.set("openai-codex", {"type": "oauth", **await trio.to_thread.run_sync(_login, "openai-codex")})
        model = plain_model(llm, api="openai-codex-responses", provider="openai-codex")
        with trio.fail_after(30):
            async with provider_peer() as peer:
                _, final, _ = await call_stream(peer, {"model": model, "context": T.to_plain(hello_context())})
    assert final.stop_reason == "stop" and final.content[0].text == "hello from codex"
    headers = llm.requests[0]["headers"]
    assert headers["authorization"] == f"Bearer {store.get('openai-codex')['access']}"
    assert headers["chatgpt-account-id"] == ACCOUNT_ID


async def test_a_logged_in_copilot_streams_with_its_copilot_token_and_pis_request_headers(start_llm, tmp_path,
                                                                                         monkeypatch):
    llm = await start_llm([Reply(text="hello from copilot")])
    with OAuthServer() as oauth:
        monkeypatch.setenv("PI_ACTORS_OAUTH_URL", oauth.url)
        monkeypatch.setenv("PI_ACTORS_DIR", str(tmp_path))
        for name in ("COPILOT_GITHUB_TOKEN", "GH_TOKEN"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("GITHUB_TOKEN", "ghp-from-env")
        store = AuthStore(str(tmp_path / "auth.json"))
        store.set("github-copilot", {"type": "oauth", **await trio.to_thread.run_sync(_login, "github-copilot")})
        # A models.json baseUrl of one's own (here the scripted model) is kept; a Copilot-hosted
        # one would follow the token's proxy-ep.
        model = plain_model(llm, api="openai-completions", provider="github-copilot")
        with trio.fail_after(30):
            async with provider_peer() as peer:
                _, final, _ = await call_stream(peer, {"model": model, "context": T.to_plain(hello_context())})
    assert final.stop_reason == "stop" and final.content[0].text == "hello from copilot"
    headers = llm.requests[0]["headers"]
    assert headers["authorization"] == f"Bearer {store.get('github-copilot')['access']}"
    assert headers["x-initiator"] == "user" and headers["openai-intent"] == "conversation-edits"
