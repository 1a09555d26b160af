"""/login and /logout in the real TUI (tmux), against the scripted OAuth server: GitHub
Copilot's device-code login, the models it makes available, and logging out again."""

from __future__ import annotations

import json
import shutil

import pytest

from pi_actors.testing.oauth_server import OAuthServer

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")


async def test_login_with_a_device_code_then_its_models_are_offered_and_logout_removes_it(scripted, env, pane):
    with OAuthServer(pending_polls=2) as oauth:
        prefix = f"PI_ACTORS_OAUTH_URL={oauth.url} PI_ACTORS_NO_BROWSER=1 "
        await pane.start(env_prefix=prefix)
        await pane.type("/login github-copilot")
        await pane.keys("Enter")
        await pane.wait_for("GitHub Enterprise URL/domain (blank for github.com)")
        await pane.keys("Enter")  # github.com
        screen = await pane.wait_for("Logged in to GitHub Copilot")
        assert "https://github.com/login/device" in screen and "Enter code: ABCD-1234" in screen
        saved = json.loads((env.home / "auth.json").read_text())["github-copilot"]
        assert saved["type"] == "oauth" and saved["refresh"].startswith("gho_")
        assert oauth.requests.count("POST /login/oauth/access_token") == 3  # two pending polls, then the token

        await pane.type("/model github-copilot/")
        await pane.keys("Enter")
        await pane.wait_for("→ github-copilot/claude-haiku-4.5", "(26 items")  # a logged-in provider's models are offered
        await pane.keys("Escape")
        await pane.wait_for_gone("Select model")

        await pane.type("/logout github-copilot")
        await pane.keys("Enter")
        await pane.wait_for("Logged out of GitHub Copilot")
        assert json.loads((env.home / "auth.json").read_text()) == {}
        await pane.type("/logout")
        await pane.keys("Enter")
        await pane.wait_for("No stored credentials to remove. /logout only removes credentials saved by /login")
