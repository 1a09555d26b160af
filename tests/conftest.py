"""Shared fixtures: the scripted LLM server, and a CLI environment pointed at it."""

from __future__ import annotations

import json
import os
import sys
import uuid
from pathlib import Path

import pytest
import trio

from pi_actors.ai import types as T
from pi_actors.cli.main import runtime_config
from pi_actors.protocol.config import RuntimeConfig
from pi_actors.testing.scripted_server import Reply, ScriptedLLM

CLI = str(Path(sys.executable).with_name("pi-actors"))


def _models_json(server: ScriptedLLM) -> dict:
    return {
        "providers": {
            "scripted": {
                "baseUrl": server.base_url_openai,
                "api": "openai-completions",
                "apiKey": "test-key",
                "models": [{"id": "scripted-model"}],
            },
            "scripted-anthropic": {
                "baseUrl": server.base_url_anthropic,
                "api": "anthropic-messages",
                "apiKey": "SCRIPTED_ANTHROPIC_KEY_VAR",
                "models": [{"id": "scripted-claude"}],
            },
        }
    }


class Env:
    def __init__(self, tmp_path: Path, server: ScriptedLLM) -> None:
        self.home = tmp_path / "agent"
        self.home.mkdir()
        self.work = tmp_path / "work"
        self.work.mkdir()
        self.sessions = tmp_path / "sessions"
        (self.home / "models.json").write_text(json.dumps(_models_json(server)))
        self.marker = uuid.uuid4().hex
        self.env = {
            k: v for k, v in os.environ.items() if not (k.endswith("_API_KEY") or k.startswith("ANTHROPIC_") or k.startswith("OPENAI_"))
        }
        self.env.update(
            PI_ACTORS_DIR=str(self.home),
            PI_ACTORS_TEST_MARKER=self.marker,
            SCRIPTED_ANTHROPIC_KEY_VAR="anthropic-test-key",
        )

    async def run(self, *args: str, stdin: bytes = b"", cwd: Path | None = None) -> trio.CompletedProcess:
        """The CLI with ``args``, started in ``cwd`` (default: the work directory)."""
        with trio.fail_after(60):
            return await trio.run_process(
                [CLI, *args], stdin=stdin, capture_stdout=True, capture_stderr=True, check=False, env=self.env,
                cwd=cwd or self.work,
            )


@pytest.fixture
async def scripted(nursery):
    """A scripted LLM server on 127.0.0.1; append Replies to ``scripted.script``."""
    replies: list[Reply] = []
    server = ScriptedLLM(replies)
    await nursery.start(server.serve)
    server.script = replies
    return server


@pytest.fixture
def start_llm(nursery):
    """Start a scripted LLM server per call: ``server = await start_llm([Reply(...), ...])``."""

    async def start(replies: list[Reply]) -> ScriptedLLM:
        server = ScriptedLLM(replies)
        await nursery.start(server.serve)
        return server

    return start


@pytest.fixture
def env(tmp_path, scripted):
    """A home (PI_ACTORS_DIR with models.json for the scripted server) and a work directory."""
    return Env(tmp_path, scripted)


def actor_config(
    server: ScriptedLLM, cwd, tools=("read", "bash"), *, settings=None, context_window=128000, session=None
) -> RuntimeConfig:
    """Actor configuration for an in-process UI: the scripted model, no session file unless
    ``session`` (a ``SessionConfig`` document) chooses one. Auto-retry is off unless
    ``settings`` turns it on (its back-off would wait seconds)."""
    model = T.Model(
        id="scripted-model", api="openai-completions", provider="scripted", base_url=server.base_url_openai,
        context_window=context_window,
    )
    return runtime_config(
        settings=settings or {"retry": {"enabled": False}},
        model=model,
        thinking="off",
        tools=list(tools),
        cwd=str(cwd),
        system_prompt="You are a test.",
        no_session=True,
        session=session,
        agent_dir=str(cwd),
        runtime_keys={"scripted": "k"},
        key_sources={},
    )


def served_credentials():
    """In-memory server credentials: client "tester" (token "tok"), tool host "h1" (token
    "h1-tok"), admin "root" (token "admin-tok")."""
    from pi_actors.server import Credentials

    creds = Credentials()
    creds.add("tester", "client", token="tok")
    creds.add("h1", "tool-host", token="h1-tok")
    creds.add("root", "admin", token="admin-tok")
    return creds


@pytest.fixture
async def server(scripted, tmp_path, nursery):
    """A session server (``pi_actors.server.Server``) on a WebSocket at 127.0.0.1 with the
    ``served_credentials`` (client token "tok", tool host h1's "h1-tok"); ``server.url`` is its
    address; sessions work in ``tmp_path/served`` (its root). Sessions run the scripted model."""
    from pi_actors.server import Server

    served = tmp_path / "served"
    served.mkdir()
    srv = Server(lambda cwd: actor_config(scripted, cwd), default_cwd=str(served), shutdown_grace=1.0, credentials=served_credentials())
    cm = srv.running()
    await cm.__aenter__()
    ws = await nursery.start(srv.serve_websocket, "127.0.0.1", 0, None)
    srv.url = f"ws://127.0.0.1:{ws.port}/"
    yield srv
    await cm.__aexit__(None, None, None)


@pytest.fixture
async def pane(env):
    """A tmux pane for driving the real CLI's terminal UI (``_tmux.Pane``), closed after the test."""
    from _tmux import Pane

    p = Pane(env)
    try:
        yield p
    finally:
        await p.close()
