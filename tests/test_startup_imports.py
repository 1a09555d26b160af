"""Start-up guard (issue 9, item 5): the heavy libraries are imported only where needed.

Not a timing: each check runs a fresh interpreter and looks at ``sys.modules``. The provider
SDKs belong in the provider process, at its first use; ``rich`` and ``prompt_toolkit`` (a
future TUI) in the interactive UI only. Importing the package, the CLI entry point or the ai
layer — and the CLI process itself, up to the moment it starts the runtime — must not pull
them in, or every process (and ``pi-actors --version``) pays for them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
HEAVY = ("openai", "anthropic", "google", "rich", "prompt_toolkit", "httpx", "httpx2")

_REPORT = textwrap.dedent(
    f"""
    import sys
    def heavy():
        return sorted({{name.split(".")[0] for name in sys.modules}} & set({HEAVY!r}))
    """
)


def _run(code: str, tmp_path: Path, *args: str) -> list[str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.update(PYTHONPATH=str(ROOT), PI_ACTORS_DIR=str(tmp_path))
    out = subprocess.run(
        [sys.executable, "-c", _REPORT + textwrap.dedent(code), *args],
        capture_output=True, text=True, cwd=tmp_path, env=env, stdin=subprocess.DEVNULL, timeout=60,
    )
    assert out.returncode == 0, out.stderr
    last = out.stdout.strip().splitlines()[-1]
    return json.loads(last)


@pytest.mark.parametrize(
    "modules",
    [
        "pi_actors",
        "pi_actors.cli",
        "pi_actors.cli.main",
        "pi_actors.ai",
        "pi_actors, pi_actors.cli.main, pi_actors.ai",
    ],
)
def test_importing_leaves_the_sdks_and_ui_libraries_out(modules, tmp_path):
    loaded = _run(f"import json\nimport {modules}\nprint(json.dumps(heavy()))", tmp_path)
    assert loaded == [], f"import {modules} pulled in {loaded}"


def test_version_and_help_leave_them_out(tmp_path):
    code = """
        import json
        from pi_actors.cli.main import main
        for argv in (["--version"], ["--help"]):
            try:
                main(argv)
            except SystemExit:
                pass
        print(json.dumps(heavy()))
    """
    assert _run(code, tmp_path) == []


def test_the_cli_process_starts_the_runtime_without_them(tmp_path):
    # Everything the CLI does before it hands over to the actors (flags, models.json, model
    # choice, system prompt, renderer): stop it at trio.run and look.
    (tmp_path / "models.json").write_text(json.dumps({"providers": {"scripted": {
        "baseUrl": "http://127.0.0.1:9/v1", "api": "openai-completions", "apiKey": "k",
        "models": [{"id": "scripted-model"}]}}}))
    code = """
        import json, trio
        seen = []
        trio.run = lambda *args, **kwargs: seen.append(heavy()) or 0
        from pi_actors.cli.main import main
        try:
            main(["--model", "scripted/scripted-model", "--no-session", "-p", "hello"])
        except SystemExit:
            pass
        assert seen, "the CLI never reached trio.run"
        print(json.dumps(seen[0]))
    """
    assert _run(code, tmp_path) == []


def test_print_mode_reads_no_package_metadata_or_login_code_it_does_not_need(tmp_path):
    # No package in the settings and no auth.json: the CLI reaches trio.run without the
    # package-metadata reader (importlib.metadata, which imports the email package) and the
    # OAuth login flows (http.server and the rest), about 0.1 s of start-up each.
    (tmp_path / "models.json").write_text(json.dumps({"providers": {"scripted": {
        "baseUrl": "http://127.0.0.1:9/v1", "api": "openai-completions", "apiKey": "k",
        "models": [{"id": "scripted-model"}]}}}))
    code = """
        import json, sys, trio
        seen = []
        unwanted = ("importlib.metadata", "email", "http.server", "pi_actors.ai.oauth")
        trio.run = lambda *args, **kwargs: seen.append(sorted(m for m in unwanted if m in sys.modules)) or 0
        from pi_actors.cli.main import main
        try:
            main(["--model", "scripted/scripted-model", "--no-session", "-p", "hello"])
        except SystemExit:
            pass
        assert seen, "the CLI never reached trio.run"
        print(json.dumps(seen[0]))
    """
    assert _run(code, tmp_path) == []


def test_the_sandbox_code_imports_without_the_session_code_and_the_coding_names_still_resolve(tmp_path):
    # The tool pool imports coding.sandbox: not the session code, the tools or trio with it.
    code = """
        import json, sys
        import pi_actors.coding.sandbox
        loaded = sorted(m for m in ("trio", "pi_actors.coding.session", "pi_actors.coding.tools") if m in sys.modules)
        from pi_actors.coding import DEFAULT_TOOLS, SessionWriter, run_tool
        import pi_actors.coding as coding
        assert coding.load_session is pi_actors.coding.session.load_session and callable(run_tool)
        assert SessionWriter.__module__.startswith("pi_actors.coding.session") and DEFAULT_TOOLS
        try:
            coding.no_such_name
        except AttributeError as exc:
            assert "no_such_name" in str(exc)
        else:
            raise AssertionError("an unknown name resolved")
        print(json.dumps(loaded))
    """
    assert _run(code, tmp_path) == []
