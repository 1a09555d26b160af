"""The Google subscription logins (Gemini CLI, Antigravity) against the scripted OAuth server:
authorization with PKCE and a local callback, token exchange with the installed app's secret,
Code Assist project discovery and onboarding, refresh before expiry under the lock, a revoked
refresh token, and ``pi-actors login google-gemini-cli`` as a real process."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import urllib.parse
import urllib.request

import pytest

from pi_actors.ai.oauth import AuthStore, LoginExpiredError, LoginIO, OAuthError, code_assist_credentials, get_oauth_provider
from pi_actors.testing.oauth_server import GOOGLE_EMAIL, ONBOARDED_PROJECT, OAuthServer


@pytest.fixture
def oauth(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("GOOGLE_CLOUD_PROJECT", raising=False)
    monkeypatch.delenv("GOOGLE_CLOUD_PROJECT_ID", raising=False)
    with OAuthServer() as server:
        monkeypatch.setenv("PI_ACTORS_OAUTH_URL", server.url)
        monkeypatch.setenv("PI_ACTORS_OAUTH_CALLBACK_PORT", "0")
        yield server


def browser(progress: list[str] | None = None) -> LoginIO:
    """A user who opens the login URL and consents (the server redirects to our callback)."""
    shown: list[str] = []

    def show(url: str, instructions: str) -> None:
        shown.append(url)
        urllib.request.urlopen(url, timeout=10).read()

    io = LoginIO(show=show, sleep=lambda s: None, timeout=10,
                 progress=(progress.append if progress is not None else (lambda text: None)))
    io.shown = shown  # type: ignore[attr-defined]
    return io


@pytest.mark.parametrize("provider", ["google-gemini-cli", "google-antigravity"])
def test_google_login_stores_the_project_and_email_and_gives_pi_s_token_json(oauth: OAuthServer, tmp_path,
                                                                             provider: str) -> None:
    io = browser()
    creds = get_oauth_provider(provider).login(io)
    query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(io.shown[0]).query))  # type: ignore[attr-defined]
    assert io.shown[0].startswith(f"{oauth.url}/o/oauth2/v2/auth?")  # type: ignore[attr-defined]
    assert query["code_challenge_method"] == "S256" and query["access_type"] == "offline"
    assert query["prompt"] == "consent" and query["state"] and "cloud-platform" in query["scope"]
    assert ("cclog" in query["scope"]) == (provider == "google-antigravity")
    assert query["redirect_uri"].endswith("/oauth2callback" if provider == "google-gemini-cli" else "/oauth-callback")
    assert creds["access"].startswith("ya29.") and creds["refresh"].startswith("rt-")
    assert creds["projectId"] == "scripted-project" and creds["email"] == GOOGLE_EMAIL
    assert "POST /v1internal:loadCodeAssist" in oauth.requests and "POST /v1internal:onboardUser" not in oauth.requests

    store = AuthStore(str(tmp_path / "auth.json"))
    store.set(provider, {"type": "oauth", **creds})
    assert stat.S_IMODE(os.stat(tmp_path / "auth.json").st_mode) == 0o600
    key = store.api_key(provider)
    assert key is not None and json.loads(key) == {"token": creds["access"], "projectId": "scripted-project"}
    assert code_assist_credentials(key) == (creds["access"], "scripted-project")


def test_a_user_without_a_project_is_onboarded_on_the_free_tier(oauth: OAuthServer) -> None:
    oauth.google_project = None
    oauth.onboard_polls = 3
    progress: list[str] = []
    creds = get_oauth_provider("google-gemini-cli").login(browser(progress))
    assert creds["projectId"] == ONBOARDED_PROJECT
    assert oauth.onboard_bodies == [{"tierId": "free-tier", "metadata": {
        "ideType": "IDE_UNSPECIFIED", "platform": "PLATFORM_UNSPECIFIED", "pluginType": "GEMINI"}}]
    polls = [r for r in oauth.requests if r.startswith("GET /v1internal/operations/")]
    assert len(polls) == 3
    assert "Provisioning Cloud Code Assist project (this may take a moment)..." in progress


def test_a_paid_tier_needs_the_environment_s_project_and_says_so_in_one_line(oauth: OAuthServer, monkeypatch) -> None:
    oauth.google_project = None
    oauth.allowed_tiers = [{"id": "standard-tier", "isDefault": True}]
    with pytest.raises(OAuthError) as info:
        get_oauth_provider("google-gemini-cli").login(browser())
    assert "\n" not in str(info.value) and "GOOGLE_CLOUD_PROJECT" in str(info.value)

    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "my-own-project")
    creds = get_oauth_provider("google-gemini-cli").login(browser())
    assert creds["projectId"] == ONBOARDED_PROJECT
    assert oauth.onboard_bodies[-1]["cloudaicompanionProject"] == "my-own-project"
    assert oauth.onboard_bodies[-1]["metadata"]["duetProject"] == "my-own-project"


def test_antigravity_without_a_project_uses_the_default_one(oauth: OAuthServer) -> None:
    oauth.google_project = None
    creds = get_oauth_provider("google-antigravity").login(browser())
    assert creds["projectId"] == "rising-fact-p41fc"
    assert oauth.requests.count("POST /v1internal:loadCodeAssist") == 2  # production, then the sandbox


@pytest.mark.parametrize("provider", ["google-gemini-cli", "google-antigravity"])
def test_an_expired_google_login_is_refreshed_keeping_its_refresh_token_and_project(oauth: OAuthServer, tmp_path,
                                                                                    provider: str) -> None:
    oauth.expires_in = 0  # logins that are already expired (expires is 5 minutes early)
    creds = get_oauth_provider(provider).login(browser())
    store = AuthStore(str(tmp_path / "auth.json"))
    store.set(provider, {"type": "oauth", **creds})
    oauth.expires_in = 3600
    key = store.api_key(provider)
    saved = store.get(provider)
    assert saved is not None and oauth.refreshes == 1
    assert saved["access"] != creds["access"] and saved["refresh"] == creds["refresh"]
    assert saved["projectId"] == creds["projectId"] and saved["email"] == GOOGLE_EMAIL
    assert key is not None and json.loads(key)["token"] == saved["access"]
    assert store.api_key(provider) == key and oauth.refreshes == 1  # fresh now: no second refresh


def test_a_revoked_google_refresh_token_says_to_login_again_in_one_line(oauth: OAuthServer, tmp_path) -> None:
    oauth.expires_in = 0
    creds = get_oauth_provider("google-gemini-cli").login(browser())
    store = AuthStore(str(tmp_path / "auth.json"))
    store.set("google-gemini-cli", {"type": "oauth", **creds})
    oauth.revoke_all()
    with pytest.raises(LoginExpiredError) as info:
        store.api_key("google-gemini-cli")
    text = str(info.value)
    assert "\n" not in text and text.endswith("run /login google-gemini-cli again")
    assert "refused the refresh token (400)" in text
    assert store.get("google-gemini-cli") == {"type": "oauth", **creds}  # kept for a later /login to replace


@pytest.mark.parametrize("key", ["ya29.plain-token", '{"token": "t"}', "[1, 2]", '{"token": 3, "projectId": "p"}'])
def test_a_google_key_that_is_not_token_and_project_is_one_line(key: str) -> None:
    with pytest.raises(OAuthError) as info:
        code_assist_credentials(key)
    assert "\n" not in str(info.value) and "/login" in str(info.value)


def test_pi_actors_login_google_gemini_cli_with_a_pasted_redirect_url(tmp_path) -> None:
    """A script logs in with the browser elsewhere: the redirect URL is pasted on stdin."""
    with OAuthServer() as oauth:
        env = {**os.environ, "PI_ACTORS_DIR": str(tmp_path), "PI_ACTORS_OAUTH_URL": oauth.url,
               "PI_ACTORS_OAUTH_CALLBACK_PORT": "0"}
        env.pop("GOOGLE_CLOUD_PROJECT", None)
        proc = subprocess.Popen([sys.executable, "-m", "pi_actors.cli.main", "login", "google-gemini-cli", "--no-browser"],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        try:
            assert proc.stdout is not None and proc.stdin is not None
            assert proc.stdout.readline().strip() == "Open this URL to log in:"
            url = proc.stdout.readline().strip()
            assert url.startswith(f"{oauth.url}/o/oauth2/v2/auth?")

            class Keep(urllib.request.HTTPRedirectHandler):
                def redirect_request(self, *args, **kwargs):  # type: ignore[no-untyped-def]
                    return None

            try:
                urllib.request.build_opener(Keep).open(url, timeout=10)
                raise AssertionError("the authorize step did not redirect")
            except urllib.error.HTTPError as exc:
                location = exc.headers["Location"]
            proc.stdin.write(location + "\n")
            proc.stdin.flush()
            out, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
        assert proc.returncode == 0, err
        assert out.strip().endswith("Logged in to Google Cloud Code Assist (Gemini CLI)")
        saved = json.loads((tmp_path / "auth.json").read_text())["google-gemini-cli"]
        assert saved["type"] == "oauth" and saved["projectId"] == "scripted-project"
        listed = subprocess.run([sys.executable, "-m", "pi_actors.cli.main", "login"], capture_output=True,
                                text=True, env=env, timeout=60).stdout
        assert "google-gemini-cli" in listed and "google-antigravity" in listed
        line = next(x for x in listed.splitlines() if "google-gemini-cli" in x)
        assert line.endswith("(logged in)")


async def test_a_google_login_streams_through_code_assist_with_its_token_and_project(start_llm, tmp_path,
                                                                                     monkeypatch):
    """The provider actor takes a Google login from auth.json, refreshes it when expired, and
    the Code Assist request carries its bearer token and project."""
    import trio
    from support.providers import call_stream, hello_context, provider_peer

    from pi_actors.ai import types as T
    from pi_actors.testing import Reply

    llm = await start_llm([Reply(text="hello from gemini")])
    monkeypatch.delenv("GOOGLE_CLOUD_PROJECT", raising=False)
    with OAuthServer(expires_in=0) as oauth:
        monkeypatch.setenv("PI_ACTORS_OAUTH_URL", oauth.url)
        monkeypatch.setenv("PI_ACTORS_OAUTH_CALLBACK_PORT", "0")
        monkeypatch.setenv("PI_ACTORS_DIR", str(tmp_path))
        creds = await trio.to_thread.run_sync(lambda: get_oauth_provider("google-gemini-cli").login(browser()))
        store = AuthStore(str(tmp_path / "auth.json"))
        store.set("google-gemini-cli", {"type": "oauth", **creds})
        oauth.expires_in = 3600
        model = T.to_plain(T.Model(id="gemini-2.5-pro", api="google-gemini-cli", provider="google-gemini-cli",
                                   base_url=llm.base_url_code_assist, reasoning=True, input=["text", "image"]))
        with trio.fail_after(30):
            async with provider_peer() as peer:
                _, final, _ = await call_stream(peer, {"model": model, "context": T.to_plain(hello_context())})
    assert final.stop_reason == "stop" and final.content[0].text == "hello from gemini"
    fresh = store.get("google-gemini-cli")
    assert oauth.refreshes == 1 and fresh is not None
    request = llm.requests[0]
    assert request["path"] == "/v1internal:streamGenerateContent"
    assert request["headers"]["authorization"] == f"Bearer {fresh['access']}"
    assert request["body"]["project"] == "scripted-project" and request["body"]["model"] == "gemini-2.5-pro"
