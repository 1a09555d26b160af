"""Subscription logins against the scripted OAuth server (pi_actors.testing.oauth_server):
authorization with PKCE, token exchange, refresh, expiry, revoked refresh tokens, the Copilot
device code, and auth.json's shape, mode and errors."""

from __future__ import annotations

import json
import os
import stat
import urllib.error
import urllib.request

import pytest

from pi_actors.ai.oauth import (
    AuthFileError,
    AuthStore,
    LoginExpiredError,
    LoginIO,
    OAuthError,
    codex_account_id,
    get_oauth_provider,
)
from pi_actors.testing.oauth_server import ACCOUNT_ID, OAuthServer


@pytest.fixture
def oauth(monkeypatch: pytest.MonkeyPatch):
    with OAuthServer() as server:
        monkeypatch.setenv("PI_ACTORS_OAUTH_URL", server.url)
        monkeypatch.setenv("PI_ACTORS_OAUTH_CALLBACK_PORT", "0")
        yield server


def browser() -> LoginIO:
    """A user who opens the login URL and consents (the server redirects to our callback)."""
    shown: list[tuple[str, str]] = []

    def show(url: str, instructions: str) -> None:
        shown.append((url, instructions))
        if url.startswith("http://127.0.0.1"):
            urllib.request.urlopen(url, timeout=10).read()

    io = LoginIO(show=show, sleep=lambda s: None, timeout=10)
    io.shown = shown  # type: ignore[attr-defined]
    return io


@pytest.mark.parametrize("provider", ["anthropic", "openai-codex", "github-copilot"])
def test_login_stores_pi_shaped_credentials_in_a_private_auth_json(oauth: OAuthServer, tmp_path, provider: str) -> None:
    creds = get_oauth_provider(provider).login(browser())
    store = AuthStore(str(tmp_path / "auth.json"))
    store.set(provider, {"type": "oauth", **creds})
    saved = json.loads((tmp_path / "auth.json").read_text())[provider]
    assert saved["type"] == "oauth" and saved["access"] and saved["refresh"] and saved["expires"] > 0
    assert stat.S_IMODE(os.stat(tmp_path / "auth.json").st_mode) == 0o600
    assert store.api_key(provider) == saved["access"]
    if provider == "openai-codex":
        assert saved["accountId"] == ACCOUNT_ID == codex_account_id(saved["access"])
    if provider == "anthropic":
        assert saved["access"].startswith("sk-ant-oat")
    if provider == "github-copilot":
        assert "proxy-ep=" in saved["access"] and saved["refresh"].startswith("gho_")
        assert oauth.requests.count("POST /login/oauth/access_token") == 2  # one pending poll, then the token


def test_a_pasted_redirect_url_completes_the_login_without_the_browser_redirect(oauth: OAuthServer) -> None:
    """The browser is on another machine: the user pastes the final redirect URL."""
    pasted: list[str] = []

    def show(url: str, instructions: str) -> None:
        # Follow the authorization without letting it reach our callback: keep the Location.
        class NoRedirect(urllib.request.HTTPRedirectHandler):
            def redirect_request(self, *args, **kwargs):  # type: ignore[no-untyped-def]
                return None

        try:
            urllib.request.build_opener(NoRedirect).open(url, timeout=10)
        except urllib.error.HTTPError as exc:
            pasted.append(exc.headers["Location"])

    import threading

    ready = threading.Event()

    def paste() -> str:
        ready.wait(10)
        return pasted[0]

    io = LoginIO(show=lambda u, i: (show(u, i), ready.set()), paste=paste, timeout=10)
    creds = get_oauth_provider("anthropic").login(io)
    assert creds["access"].startswith("sk-ant-oat")


def test_the_token_endpoint_refuses_a_verifier_that_does_not_match_the_challenge(oauth: OAuthServer) -> None:
    """The scripted server's PKCE check (which every successful login above passed)."""
    import urllib.parse

    from pi_actors.ai.oauth import pkce_pair, request_json

    verifier, challenge = pkce_pair()
    redirect = "http://localhost:1/cb"
    query = urllib.parse.urlencode({"code_challenge": challenge, "code_challenge_method": "S256", "redirect_uri": redirect,
                                    "state": "s"})

    class Keep(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args, **kwargs):  # type: ignore[no-untyped-def]
            return None

    try:
        urllib.request.build_opener(Keep).open(f"{oauth.url}/oauth/authorize?{query}", timeout=10)
    except urllib.error.HTTPError as exc:
        code = urllib.parse.parse_qs(urllib.parse.urlsplit(exc.headers["Location"]).query)["code"][0]
    with pytest.raises(OAuthError, match="PKCE verification failed"):
        request_json("https://auth.openai.com/oauth/token", form={"grant_type": "authorization_code", "code": code,
                                                                    "code_verifier": verifier + "x", "redirect_uri": redirect})


@pytest.mark.parametrize("provider", ["anthropic", "openai-codex", "github-copilot"])
def test_an_expired_login_is_refreshed_once_and_saved(oauth: OAuthServer, tmp_path, provider: str) -> None:
    oauth.expires_in = 0  # every token is born expired
    store = AuthStore(str(tmp_path / "auth.json"))
    store.set(provider, {"type": "oauth", **get_oauth_provider(provider).login(browser())})
    old = store.get(provider)
    oauth.expires_in = 3600
    assert store.needs_refresh(provider)
    key = store.api_key(provider)
    new = store.get(provider)
    assert key == new["access"] != old["access"]
    assert not store.needs_refresh(provider) and oauth.refreshes == 1 + (provider == "github-copilot")
    assert store.api_key(provider) == key and oauth.refreshes == 1 + (provider == "github-copilot")


@pytest.mark.parametrize("provider", ["anthropic", "openai-codex", "github-copilot"])
def test_a_revoked_refresh_token_says_to_login_again_in_one_line(oauth: OAuthServer, tmp_path, provider: str) -> None:
    oauth.expires_in = 0
    store = AuthStore(str(tmp_path / "auth.json"))
    store.set(provider, {"type": "oauth", **get_oauth_provider(provider).login(browser())})
    oauth.revoke_all()
    with pytest.raises(LoginExpiredError) as info:
        store.api_key(provider)
    message = str(info.value)
    assert "\n" not in message and f"/login {provider}" in message and "refused the refresh token" in message
    assert store.get(provider) is not None  # kept: /login replaces it


def test_device_flow_errors_other_than_pending_end_the_login(oauth: OAuthServer) -> None:
    oauth.deny_device = True
    with pytest.raises(OAuthError, match="^Device flow failed: access_denied: the user said no$"):
        get_oauth_provider("github-copilot").login(browser())


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("{not json", "malformed JSON"),
        ("[]", "expected a JSON object"),
        ('{"anthropic": "x"}', "anthropic: expected an object"),
        ('{"anthropic": {"type": "oauth", "access": "a"}}', "anthropic: an oauth entry needs"),
        ('{"openai": {"type": "api_key"}}', "openai: an api_key entry needs a string key"),
        ('{"openai": {"type": "token", "key": "k"}}', "unknown type 'token'"),
    ],
)
def test_a_malformed_auth_json_is_one_line_naming_the_file(tmp_path, text: str, fragment: str) -> None:
    path = tmp_path / "auth.json"
    path.write_text(text)
    with pytest.raises(AuthFileError) as info:
        AuthStore(str(path)).api_key("anthropic")
    assert str(info.value).startswith(str(path)) and fragment in str(info.value) and "\n" not in str(info.value)


def test_an_api_key_entry_resolves_like_models_json(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("MY_GROQ", "from-env-var")
    store = AuthStore(str(tmp_path / "auth.json"))
    store.set("groq", {"type": "api_key", "key": "MY_GROQ"})
    store.set("xai", {"type": "api_key", "key": "literal-key"})
    assert store.api_key("groq") == "from-env-var" and store.api_key("xai") == "literal-key"
    assert store.remove("xai") and not store.remove("xai") and store.api_key("xai") is None


def test_unknown_login_provider_names_the_available_ones() -> None:
    with pytest.raises(OAuthError, match=(
        'No subscription login for "nope". Available: anthropic, github-copilot, google-gemini-cli, google-antigravity, openai-codex')):
        get_oauth_provider("nope")


_RACER = """
import sys
from pi_actors.ai.oauth import AuthStore
store = AuthStore(sys.argv[1])
assert store.needs_refresh("anthropic")
print("expired", flush=True)
sys.stdin.readline()
print(store.refresh_login("anthropic"), flush=True)
"""


def test_two_processes_seeing_an_expired_login_refresh_it_only_once(oauth: OAuthServer, tmp_path) -> None:
    """Both processes saw the expired token before either refreshed; the lock (and the read
    again under it) makes the second take the first's token instead of spending the refresh
    token a second time, which the server would refuse."""
    import subprocess
    import sys

    oauth.expires_in = 0
    path = str(tmp_path / "auth.json")
    AuthStore(path).set("anthropic", {"type": "oauth", **get_oauth_provider("anthropic").login(browser())})
    oauth.expires_in = 3600
    env = {**os.environ, "PI_ACTORS_OAUTH_URL": oauth.url}
    procs = [subprocess.Popen([sys.executable, "-c", _RACER, path], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env) for _ in range(2)]
    try:
        for p in procs:
            assert p.stdout is not None and p.stdout.readline().strip() == "expired"
        for p in procs:  # both are past their check: let them race
            assert p.stdin is not None
            p.stdin.write("go\n")
            p.stdin.flush()
        outs = [p.communicate(timeout=60) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    assert [p.returncode for p in procs] == [0, 0], [err for _, err in outs]
    keys = {out.strip() for out, _ in outs}
    assert keys == {AuthStore(path).get("anthropic")["access"]}
    assert oauth.refreshes == 1


# --- parsers under hostile input --------------------------------------------------------------

from hypothesis import example, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from pi_actors.ai.oauth import parse_pasted_code  # noqa: E402

_json = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
                     lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
                     max_leaves=12)


@settings(max_examples=50, deadline=None)
@given(st.one_of(st.binary(max_size=200), _json.map(lambda v: json.dumps(v).encode()),
                 st.dictionaries(st.sampled_from(["anthropic", "openai"]), st.dictionaries(
                     st.sampled_from(["type", "access", "refresh", "expires", "key"]), _json, max_size=5), max_size=2)
                 .map(lambda v: json.dumps(v).encode())))
@example(b'{"\\n": null}')  # a provider name with a newline (hypothesis found it in a full run)
@example(b'{"\\u0007x": {"type": 1}}')
def test_any_auth_json_is_read_or_refused_in_one_line(tmp_path_factory, data: bytes) -> None:
    path = tmp_path_factory.getbasetemp() / "hostile-auth.json"
    path.write_bytes(data)
    try:
        read = AuthStore(str(path)).read()
    except AuthFileError as exc:
        assert str(exc).startswith(str(path)) and "\n" not in str(exc)
    else:
        assert isinstance(read, dict)
        for entry in read.values():
            assert entry["type"] in ("oauth", "api_key")


@given(st.text(max_size=300))
def test_any_pasted_text_gives_a_code_and_state_or_nothing(text: str) -> None:
    code, state = parse_pasted_code(text)
    assert code is None or isinstance(code, str)
    assert state is None or isinstance(state, str)


@given(st.text(max_size=200))
def test_any_token_gives_an_account_id_or_none(token: str) -> None:
    assert codex_account_id(token) is None or isinstance(codex_account_id(token), str)


def test_a_copilot_token_names_the_api_host_requests_go_to() -> None:
    from pi_actors.ai.oauth import copilot_base_url

    assert copilot_base_url("tid=1;exp=2;proxy-ep=proxy.business.githubcopilot.com;st=x") == "https://api.business.githubcopilot.com"
    assert copilot_base_url("tid=1", "ghe.example.com") == "https://copilot-api.ghe.example.com"
    assert copilot_base_url("tid=1") == "https://api.individual.githubcopilot.com"


def test_copilot_requests_say_who_initiated_them_and_when_they_carry_images() -> None:
    from pi_actors.ai import types as T
    from pi_actors.ai.oauth import copilot_request_headers

    user = T.UserMessage(content="hi", timestamp=1)
    image = T.UserMessage(content=[T.ImageContent(data="aGk=", mime_type="image/png")], timestamp=1)
    answer = T.AssistantMessage(content=[], api="a", provider="github-copilot", model="m", usage=T.Usage(),
                                stop_reason="stop", timestamp=1)
    assert copilot_request_headers([user]) == {"X-Initiator": "user", "Openai-Intent": "conversation-edits"}
    assert copilot_request_headers([image, answer]) == {"X-Initiator": "agent", "Openai-Intent": "conversation-edits",
                                                        "Copilot-Vision-Request": "true"}
