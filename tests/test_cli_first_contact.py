"""First contact with the command line (issue 18, items 7-10): what a new user meets in the
first minutes — Ctrl-C while it starts, piped input and ``@file`` arguments, a mistyped flag,
``--help``, a configuration directory that cannot be written, a wrong ``api`` in models.json.

Real CLI processes where the behaviour spans processes (Ctrl-C, the prompt that reaches the
model); in-process calls of ``main`` for what the CLI decides before any actor starts.
"""

from __future__ import annotations

import io
import json
import os
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import trio
from _procs import environ_has, live_pids, parent_pid, wait_exited, wait_for_pids
from conftest import CLI
from hypothesis import given
from hypothesis import strategies as st
from support.wire import content_text

from pi_actors.ai import read_models_json
from pi_actors.cli import main as cli_main
from pi_actors.cli._initial import initial_messages
from pi_actors.cli._usage import suggest
from pi_actors.testing.scripted_server import Reply

MODEL = ("--model", "scripted/scripted-model")


def _catches_or_ignores_sigint(pid: int) -> bool:
    """True once the interpreter of ``pid`` has installed its SIGINT handler (or ignores it):
    from then on an actor that is still importing would raise KeyboardInterrupt."""
    try:
        with open(f"/proc/{pid}/status") as f:
            fields = dict(line.split(":\t", 1) for line in f if ":\t" in line)
    except OSError:
        return False
    mask = int(fields.get("SigCgt", "0"), 16) | int(fields.get("SigIgn", "0"), 16)
    return bool(mask & (1 << (signal.SIGINT - 1)))


async def _first_started_child(root: int) -> int:
    """A child of ``root`` whose interpreter is running (it handles SIGINT)."""
    started = await wait_for_pids(
        lambda: [pid for pid in live_pids(lambda pid: parent_pid(pid) == root) if _catches_or_ignores_sigint(pid)])
    return started[0]


async def test_ctrl_c_while_the_actors_start_exits_130_without_tracebacks_or_processes_left(scripted, env):
    # Print mode starts the provider ahead and waits for the CLI's configuration: Ctrl-C (the
    # terminal sends SIGINT to the whole foreground group) reaches it mid-start.
    scripted.script.append(Reply(text="never asked"))
    proc = await trio.lowlevel.open_process(
        [CLI, *MODEL, "--no-session", "-p", "hi"], env=env.env, cwd=env.work, start_new_session=True,
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        await _first_started_child(proc.pid)
        everyone = live_pids(lambda pid: environ_has(pid, f"PI_ACTORS_TEST_MARKER={env.marker}"))
        os.killpg(proc.pid, signal.SIGINT)
        with trio.fail_after(30):
            out = await proc.stdout.receive_some(1 << 16)
            err = b""
            while chunk := await proc.stderr.receive_some(1 << 16):
                err += chunk
            code = await proc.wait()
        await wait_exited(everyone, timeout=30)
        assert "Traceback" not in err.decode() and "KeyboardInterrupt" not in err.decode(), err.decode()
        assert err.decode().strip() in ("", "Interrupted."), err.decode()
        assert code == 130 and out == b""
        assert not live_pids(lambda pid: environ_has(pid, f"PI_ACTORS_TEST_MARKER={env.marker}"))
        assert scripted.requests == []
    finally:
        for pid in live_pids(lambda pid: environ_has(pid, f"PI_ACTORS_TEST_MARKER={env.marker}")):
            os.kill(pid, signal.SIGKILL)


async def test_ctrl_c_while_the_tui_starts_exits_130_without_tracebacks(env, pane, tmp_path):
    errors = tmp_path / "stderr.txt"
    command = f"{shlex.join([CLI, *MODEL, '--no-session'])} 2>{shlex.quote(str(errors))}; echo exit=$?"
    await pane.start_argv(["sh", "-c", command], ready="")
    roots = await wait_for_pids(
        lambda: live_pids(lambda pid: environ_has(pid, f"PI_ACTORS_TEST_MARKER={env.marker}") and "pi-actors" in _cmd(pid)))
    root = roots[0]
    await _first_started_child(root)
    # As the terminal's Ctrl-C, to the foreground group — but the shells around the CLI, which
    # would die of it and take the exit status with them, are spared.
    everyone = [root, *live_pids(lambda pid: _descends_from(pid, root))]
    for pid in everyone:
        try:
            os.kill(pid, signal.SIGINT)
        except ProcessLookupError:
            pass  # a short-lived process (a forked helper) that has already gone
    await pane.wait_for("exit=130")
    await wait_exited(everyone, timeout=30)
    text = errors.read_text()
    assert "Traceback" not in text and "KeyboardInterrupt" not in text, text
    assert text.strip() in ("", "Interrupted."), text
    assert "Traceback" not in await pane.screen()


def _descends_from(pid: int, root: int) -> bool:
    while (pid := parent_pid(pid) or 0) > 1:
        if pid == root:
            return True
    return False


def _cmd(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = f.read().split(b"\0")
    except OSError:
        return ""
    return " ".join(a.decode(errors="replace") for a in argv[:2])


async def test_piped_stdin_attached_files_and_the_first_message_make_one_user_message(scripted, env):
    scripted.script.extend([Reply(text="First answer."), Reply(text="Second answer.")])
    (env.work / "notes.txt").write_text("line one\nline two")
    (env.work / "empty.txt").write_text("")
    done = await env.run(
        *MODEL, "--no-session", "@notes.txt", "@empty.txt", "explain", "and then this", stdin=b"  piped text\n\n"
    )
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout.decode() == "Second answer.\n"  # piped input: print mode, the last answer
    first = [m for m in scripted.requests[0]["body"]["messages"] if m["role"] == "user"]
    # pi 0.73.1's buildInitialMessage: stdin, the files, the first message, joined with "".
    notes = env.work / "notes.txt"
    assert [content_text(m["content"]) for m in first] == [f'piped text<file name="{notes}">\nline one\nline two\n</file>\nexplain']
    second = [m for m in scripted.requests[1]["body"]["messages"] if m["role"] == "user"]
    assert content_text(second[-1]["content"]) == "and then this" and len(scripted.requests) == 2

    missing = await env.run(*MODEL, "--no-session", "-p", "@nope.txt", "read it")
    assert missing.returncode == 1
    assert missing.stderr.decode() == f"Error: File not found: {env.work / 'nope.txt'}\n"
    (env.work / "image.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\xff\xfe")  # a PNG signature, then junk
    binary = await env.run(*MODEL, "--no-session", "-p", "@image.png", "what is it")
    assert binary.returncode == 1 and "the image cannot be decoded" in binary.stderr.decode()
    assert len(binary.stderr.decode().splitlines()) == 1 and len(scripted.requests) == 2


def _run_main(argv: list[str], capsys, monkeypatch) -> tuple[int, str, str]:
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    with pytest.raises(SystemExit) as exit_:
        cli_main.main(argv)
    out, err = capsys.readouterr()
    return int(exit_.value.code or 0), out, err


def test_a_wrong_flag_is_one_line_with_what_was_meant(capsys, monkeypatch):
    for given_flag, meant in [("--modle", "--model"), ("--sesion-dir", "--session-dir"), ("--contineu", "--continue"),
                              ("--thinkng=high", "--thinking")]:  # fmt: skip
        code, out, err = _run_main([given_flag, "x", "hello"], capsys, monkeypatch)
        name = given_flag.split("=")[0]
        assert (code, out) == (1, "")
        assert err == f"Error: unknown option {name}; did you mean {meant}?\n"
    code, _out, err = _run_main(["--zzzzzz"], capsys, monkeypatch)
    assert code == 1 and err == "Error: unknown option --zzzzzz (see pi-actors --help)\n"
    code, _out, err = _run_main(["--mode", "jsn", "hi"], capsys, monkeypatch)
    assert code == 1 and len(err.splitlines()) == 1 and "'json'" in err and "usage:" not in err
    code, _out, err = _run_main(["demo", "--kep"], capsys, monkeypatch)
    assert code == 1 and err == "Error: unknown option --kep; did you mean --keep?\n"


def test_help_lists_every_subcommand_the_config_directory_the_keys_and_where_sessions_go(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("PI_ACTORS_DIR", str(tmp_path / "conf"))
    code, out, _err = _run_main(["--help"], capsys, monkeypatch)
    assert code == 0
    for name in ["demo", "serve", "attach", "tool-host", *cli_main.SUBCOMMANDS]:
        assert f"pi-actors {name} " in out, name
    assert f"configuration ({tmp_path / 'conf'}" in out and "PI_ACTORS_DIR" in out
    assert f"saved in {tmp_path / 'conf'}/sessions/" in out and "--no-session" in out
    assert "ANTHROPIC_API_KEY" in out and "anthropic/claude-sonnet-4-5" in out
    assert "OPENAI_API_KEY" in out and "openai/gpt-5.1" in out
    code, out, _err = _run_main(["demo", "--help"], capsys, monkeypatch)
    assert code == 0 and "scripted model" in out
    assert "``" not in out and ":func:" not in out and "::" not in out


def test_a_new_subcommand_in_the_table_is_dispatched_and_listed(capsys, monkeypatch):
    monkeypatch.setitem(cli_main.SUBCOMMANDS, "hello-test", ("_usage", "a subcommand added by a test"))
    monkeypatch.setattr("pi_actors.cli._usage.main", lambda argv: print("hello", argv) or 7, raising=False)
    code, out, _err = _run_main(["hello-test", "a"], capsys, monkeypatch)
    assert (code, out) == (7, "hello ['a']\n")
    code, out, _err = _run_main(["--help"], capsys, monkeypatch)
    assert "pi-actors hello-test  a subcommand added by a test" in out.replace("   ", "  ")


@pytest.mark.parametrize("blocked", ["agent", "sessions", "project"])
def test_a_config_directory_that_cannot_be_written_is_one_line_suggesting_no_session(
    blocked, capsys, monkeypatch, tmp_path
):
    # A file where a directory must be made: each level of <agent>/sessions/--<cwd>--/.
    work = tmp_path / "work"
    work.mkdir()
    agent = tmp_path / "agent"
    if blocked == "agent":
        agent.write_text("")
    else:
        agent.mkdir()
        sessions = agent / "sessions"
        if blocked == "sessions":
            sessions.write_text("")
        else:
            sessions.mkdir()
            (sessions / f"--{str(work)[1:].replace('/', '-')}--").write_text("")
    monkeypatch.setenv("PI_ACTORS_DIR", str(agent))
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    monkeypatch.chdir(work)
    code, out, err = _run_main(["-p", "hi"], capsys, monkeypatch)
    last = err.splitlines()[-1]
    assert code == 1 and out == ""
    assert last.startswith(f"Error: Cannot save the session in {agent}") and ": Not a directory." in last, err
    assert last.endswith("Run with --no-session, or --session-dir DIR to save sessions elsewhere")
    assert "Traceback" not in err


@pytest.mark.skipif(not os.access("/proc/self/ns/mnt", os.R_OK), reason="needs /proc")
def test_a_read_only_session_directory_is_refused_before_the_model_is_asked(tmp_path):
    # Root may write anywhere the permissions forbid; a read-only mount refuses even root.
    work, agent = tmp_path / "work", tmp_path / "agent"
    work.mkdir()
    agent.mkdir()
    script = (
        f"mount --bind {agent} {agent} && mount -o remount,bind,ro {agent} && "
        f"cd {work} && PI_ACTORS_DIR={agent} OPENAI_API_KEY=k {sys.executable} -m pi_actors.cli.main -p hi"
    )
    done = subprocess.run(["unshare", "-m", "sh", "-c", script], capture_output=True, text=True, timeout=60)
    if "unshare" in done.stderr and "Operation not permitted" in done.stderr:
        pytest.skip("no mount namespaces here")
    assert done.returncode == 1
    assert done.stderr == (
        f"Error: Cannot save the session in {agent / 'sessions'}: Read-only file system. "
        "Run with --no-session, or --session-dir DIR to save sessions elsewhere\n"
    )


def test_an_unknown_api_in_models_json_names_the_file_and_lists_the_valid_ones(tmp_path):
    path = tmp_path / "models.json"
    path.write_text(json.dumps({"providers": {"local": {
        "baseUrl": "http://127.0.0.1:9/v1", "apiKey": "k", "api": "openai-chat", "models": [{"id": "m"}]}}}))  # fmt: skip
    cfg = read_models_json(path)
    assert cfg.models == []
    assert cfg.errors == [
        f'{path}: providers.local: unknown api "openai-chat" '
        "(valid: anthropic-messages, azure-openai-responses, bedrock-converse-stream, google-gemini-cli, "
        "google-generative-ai, google-vertex, mistral-conversations, openai-codex-responses, openai-completions, openai-responses)"
    ]
    path.write_text(json.dumps({"providers": {"local": {
        "baseUrl": "u", "apiKey": "k", "models": [{"id": "m", "api": "anthropic"}]}}}))  # fmt: skip
    assert "providers.local.models[0]: unknown api \"anthropic\" (valid: anthropic-messages," in read_models_json(path).errors[0]


@given(st.lists(st.text(), max_size=5), st.one_of(st.none(), st.text()))
def test_the_initial_messages_keep_every_argument_and_the_piped_text(arguments, piped):
    plain = [a for a in arguments if not a.startswith("@")]
    messages = initial_messages(plain, piped, "/nonexistent")
    stripped = (piped or "").strip()
    if not plain and not stripped:
        assert messages == []
    else:
        assert messages == [stripped + (plain[0] if plain else ""), *plain[1:]]


@given(st.text(max_size=30), st.lists(st.text(max_size=30), max_size=8))
def test_the_suggestion_is_a_known_option_or_none(word, candidates):
    hint = suggest(word, candidates)
    assert hint is None or hint in candidates
    if word in candidates and len(word) >= 3:
        assert hint == word


def test_relative_attachments_name_the_absolute_path(tmp_path):
    (tmp_path / "a b.txt").write_text("x")
    assert initial_messages(["@a b.txt", "q"], None, str(tmp_path)) == [f'<file name="{Path(tmp_path, "a b.txt")}">\nx\n</file>\nq']
