"""``pi-actors login`` / ``logout`` as a script uses them: real CLI processes against the
scripted OAuth server."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import urllib.request

from pi_actors.testing.oauth_server import OAuthServer


def _cli(*args: str, env: dict[str, str], stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pi_actors.cli.main", *args], capture_output=True, text=True,
                          env=env, input=stdin, timeout=60)


def test_login_through_the_browser_then_list_then_logout(tmp_path) -> None:
    with OAuthServer() as oauth:
        env = {**os.environ, "PI_ACTORS_DIR": str(tmp_path), "PI_ACTORS_OAUTH_URL": oauth.url,
               "PI_ACTORS_OAUTH_CALLBACK_PORT": "0"}
        proc = subprocess.Popen([sys.executable, "-m", "pi_actors.cli.main", "login", "anthropic", "--no-browser"],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        try:
            assert proc.stdout is not None
            assert proc.stdout.readline().strip() == "Open this URL to log in:"
            url = proc.stdout.readline().strip()
            assert url.startswith(f"{oauth.url}/oauth/authorize?") and "code_challenge_method=S256" in url
            urllib.request.urlopen(url, timeout=10).read()  # the user consents in the browser
            out, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
        assert proc.returncode == 0, err
        assert out.strip().endswith("Logged in to Anthropic (Claude Pro/Max)")
        auth = tmp_path / "auth.json"
        assert stat.S_IMODE(os.stat(auth).st_mode) == 0o600
        assert json.loads(auth.read_text())["anthropic"]["type"] == "oauth"

        listed = _cli("login", env=env)
        assert "Anthropic (Claude Pro/Max)  (logged in)" in listed.stdout
        assert "GitHub Copilot" in listed.stdout and "(logged in)" not in listed.stdout.split("github-copilot")[1].split("\n")[0]
        out_ = _cli("logout", "anthropic", env=env)
        assert out_.stdout.strip() == "Logged out of Anthropic (Claude Pro/Max)"
        assert json.loads(auth.read_text()) == {}


def test_login_failures_and_a_bad_auth_json_are_one_line_errors(tmp_path) -> None:
    with OAuthServer() as oauth:
        env = {**os.environ, "PI_ACTORS_DIR": str(tmp_path), "PI_ACTORS_OAUTH_URL": oauth.url,
               "PI_ACTORS_OAUTH_CALLBACK_PORT": "0"}
        pasted = _cli("login", "openai-codex", "--no-browser", env=env, stdin="not-a-real-code\n")
        assert pasted.returncode == 1
        assert pasted.stderr.strip().splitlines() == [
            "Error: Login failed: OpenAI Codex token exchange failed: HTTP 400 from "
            f'{oauth.url}/oauth/token: {{"error": "invalid_grant", "error_description": "unknown code"}}']
        (tmp_path / "auth.json").write_text('{"anthropic": {"type": "oauth"}}')
        for args in (("--list-models",),):
            bad = _cli(*args, env=env)
            assert bad.returncode == 1
            assert bad.stderr.strip() == (f"Error: {tmp_path}/auth.json: anthropic: an oauth entry needs string access "
                                          "and refresh tokens")
