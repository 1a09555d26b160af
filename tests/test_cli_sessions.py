"""Sessions from the command line: continue, open by id prefix, fork, repair after a crash."""

from __future__ import annotations

import json

from pi_actors.testing.scripted_server import Reply
from pi_actors.testing.wire_formats import ScriptToolCall

MODEL = ("--model", "scripted/scripted-model")


def _session_files(env) -> list:
    return sorted((env.home / "sessions").glob("*/*.jsonl"))


def _lines(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _sent(scripted, index: int) -> list[tuple[str, str]]:
    return [(m["role"], _text(m["content"])) for m in scripted.requests[index]["body"]["messages"]]


def _text(content) -> str:
    """A message's text: its content, or (user content as pi sends it) its text parts."""
    if isinstance(content, str):
        return content
    return "".join(p.get("text", "") for p in content or [] if p.get("type") == "text")


async def test_continue_picks_up_the_most_recent_session_of_this_directory(scripted, env):
    scripted.script += [Reply(text="First answer."), Reply(text="Second answer.")]
    first = await env.run(*MODEL, "-p", "one")
    assert first.returncode == 0, first.stderr.decode()
    second = await env.run("-c", "-p", "two")  # no --model: the session's model is restored
    assert second.returncode == 0, second.stderr.decode()
    assert second.stdout.decode() == "Second answer.\n"
    assert _sent(scripted, 1)[1:] == [("user", "one"), ("assistant", "First answer."), ("user", "two")]
    (path,) = _session_files(env)
    roles = [e["message"]["role"] for e in _lines(path) if e["type"] == "message"]
    assert roles == ["user", "assistant", "user", "assistant"]


async def test_session_flag_opens_a_session_by_id_prefix(scripted, env):
    scripted.script += [Reply(text="A."), Reply(text="B."), Reply(text="C.")]
    assert (await env.run(*MODEL, "-p", "first session")).returncode == 0
    assert (await env.run(*MODEL, "-p", "second session")).returncode == 0
    older = min(_session_files(env), key=lambda p: _lines(p)[0]["timestamp"])
    # Ids are UUIDv7 (as pi's): their first 12 digits are the creation time in ms, so a
    # prefix that tells two sessions of the same minute apart is longer than 8 digits.
    prefix = _lines(older)[0]["id"][:18]
    done = await env.run("--session", prefix, "-p", "back to the first")
    assert done.returncode == 0, done.stderr.decode()
    assert _sent(scripted, 2)[1:] == [("user", "first session"), ("assistant", "A."), ("user", "back to the first")]
    assert len(_lines(older)) == 1 + 2 + 4  # header, the initial model and thinking level, 4 messages


async def test_a_session_opened_by_its_file_from_another_directory_runs_where_it_was_saved(scripted, env):
    # pi 0.73: ``--session FILE`` (and ``-r``) run the session in its header's cwd, not in the
    # directory the command was started from: its tools, its system prompt, its sandbox.
    project = env.work / "project"
    project.mkdir()
    scripted.script += [
        Reply(text="Started."),
        Reply(tool_calls=[ScriptToolCall(name="bash", arguments={"command": "pwd; touch made-here"})]),
        Reply(text="Done."),
    ]
    assert (await env.run(*MODEL, "-p", "start", cwd=project)).returncode == 0
    (path,) = _session_files(env)
    assert _lines(path)[0]["cwd"] == str(project)
    done = await env.run("--session", str(path), "-p", "where are you?")  # started in env.work
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout.decode() == "Done.\n"
    tool_result = scripted.requests[2]["body"]["messages"][-1]
    assert tool_result["role"] == "tool" and tool_result["content"].strip() == str(project)
    assert (project / "made-here").exists() and not (env.work / "made-here").exists()
    assert f"Current working directory: {project}" in scripted.requests[1]["body"]["messages"][0]["content"]


# A project-local extension that notes, in MARKS, which project it belongs to and which
# process loaded it: the extension host (an actor process) or the CLI looking at its flags.
_MARKER = """
import sys

role = "cli" if sys.argv[0].endswith("pi-actors") else "host"
with open(MARKS, "a") as out:
    out.write(f"{LABEL} {role}\\n")

def register(pi):
    pass
"""


async def test_a_session_opened_from_another_directory_loads_the_extensions_of_its_own_project(scripted, env):
    # pi 0.73 resolves project resources after the session's cwd is known: the session's
    # project extensions run, not those of the directory the command was started from.
    project = env.work / "project"
    project.mkdir()
    scripted.script += [Reply(text="Started."), Reply(text="Again.")]
    assert (await env.run(*MODEL, "--no-extensions", "-p", "start", cwd=project)).returncode == 0
    (path,) = _session_files(env)
    marks = env.work / "marks.txt"
    for where, label in ((project, "project"), (env.work, "start")):
        (where / ".pi-actors" / "extensions").mkdir(parents=True)
        (where / ".pi-actors" / "extensions" / "marker.py").write_text(f"MARKS = {str(marks)!r}\nLABEL = {label!r}\n" + _MARKER)
    # An ``-e`` path stays relative to where the command was given (pi's resolveCliPaths).
    (env.work / "given.py").write_text(f"MARKS = {str(marks)!r}\nLABEL = 'given'\n" + _MARKER)
    done = await env.run("--session", str(path), "-e", "given.py", "-p", "again")  # started in env.work
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout.decode() == "Again.\n"
    loaded = {line for line in marks.read_text().splitlines() if line.endswith(" host")}
    assert loaded == {"project host", "given host"}, loaded


async def test_switching_over_rpc_to_a_session_saved_elsewhere_says_where_it_goes_on(scripted, env):
    # pi rebuilds its runtime in the session's directory; here the session goes on where the
    # actors were started, and the client is told so (not left to find out from a tool).
    from support.rpc import open_rpc

    project = env.work / "project"
    project.mkdir()
    scripted.script.append(Reply(text="Started."))
    assert (await env.run(*MODEL, "-p", "start", cwd=project)).returncode == 0
    (path,) = _session_files(env)
    rpc = await open_rpc(env, "--no-session")
    response = await rpc.request({"id": "sw", "type": "switch_session", "sessionPath": str(path)})
    assert await rpc.close() == 0
    assert response["success"] is True, response
    assert response["data"]["warnings"] == [
        f"this session was saved in {project}; it goes on in {env.work}, with this directory's tools, project"
        f" settings and resources; to run it there: pi-actors --session {path}"
    ]


async def test_a_session_whose_saved_directory_is_gone_is_a_clear_error_outside_the_terminal(scripted, env):
    project = env.work / "project"
    project.mkdir()
    scripted.script += [Reply(text="Started.")]
    assert (await env.run(*MODEL, "-p", "start", cwd=project)).returncode == 0
    (path,) = _session_files(env)
    project.rmdir()
    done = await env.run("--session", str(path), "-p", "still there?")
    assert done.returncode == 1
    assert done.stderr.decode() == (
        f"Error: Stored session working directory does not exist: {project}\nSession file: {path}\n"
        f"Current working directory: {env.work}\n"
    )
    assert len(scripted.requests) == 1  # the model was not asked


async def test_fork_copies_a_session_into_a_new_file_that_names_its_parent(scripted, env):
    scripted.script += [Reply(text="Original."), Reply(text="Forked.")]
    assert (await env.run(*MODEL, "-p", "start")).returncode == 0
    (original,) = _session_files(env)
    before = original.read_text()
    done = await env.run("--fork", str(original), "-p", "diverge")
    assert done.returncode == 0, done.stderr.decode()
    assert original.read_text() == before  # the source is untouched
    (forked,) = [p for p in _session_files(env) if p != original]
    lines = _lines(forked)
    assert lines[0]["parentSession"] == str(original) and lines[0]["id"] != _lines(original)[0]["id"]
    assert [e["message"]["role"] for e in lines[1:] if e["type"] == "message"] == ["user", "assistant", "user", "assistant"]


async def test_a_tool_call_left_without_a_result_by_a_crash_gets_an_error_result_on_resume(scripted, env):
    session_dir = env.home / "sessions" / "crashed"
    session_dir.mkdir(parents=True)
    path = session_dir / "2026-01-01T00-00-00-000Z_11111111-2222-4333-8444-555555555555.jsonl"
    header = {"type": "session", "version": 3, "id": "11111111-2222-4333-8444-555555555555", "timestamp": "2026-01-01T00:00:00.000Z", "cwd": str(env.work)}
    user = {"type": "message", "id": "aaaa0001", "parentId": None, "timestamp": "2026-01-01T00:00:01.000Z", "message": {"role": "user", "content": "run it", "timestamp": 1}}
    usage = {"input": 1, "output": 1, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 2, "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}}
    assistant = {
        "type": "message", "id": "aaaa0002", "parentId": "aaaa0001", "timestamp": "2026-01-01T00:00:02.000Z",
        "message": {"role": "assistant", "content": [{"type": "toolCall", "id": "call_x", "name": "bash", "arguments": {"command": "sleep 100"}}],
                    "api": "openai-completions", "provider": "scripted", "model": "scripted-model", "usage": usage, "stopReason": "toolUse", "timestamp": 2},
    }  # fmt: skip
    # The process died while the tool ran, and mid-way through writing a line.
    path.write_text("\n".join(json.dumps(r) for r in (header, user, assistant)) + '\n{"type":"message","id":"aaaa00')
    scripted.script.append(Reply(text="Recovered."))
    done = await env.run("--session", str(path), "-p", "what happened?")
    assert done.returncode == 0, done.stderr.decode()
    sent = scripted.requests[0]["body"]["messages"]
    assert sent[-2]["role"] == "tool" and sent[-2]["tool_call_id"] == "call_x" and "interrupted" in sent[-2]["content"]
    lines = _lines(path)  # the torn line is gone, the repair is on disk
    # pi's thinking_level_change is added to a continued session whose branch has none.
    kinds = [e.get("message", {}).get("role") or e["type"] for e in lines[1:]]
    assert kinds == ["user", "assistant", "toolResult", "thinking_level_change", "user", "assistant"]
    assert lines[3]["message"]["isError"] is True


async def test_an_unknown_session_is_a_one_line_error(env):
    done = await env.run("--session", "deadbeef", "-p", "hi")
    assert done.returncode == 1
    assert done.stderr.decode().strip() == "Error: No session found matching 'deadbeef'"


async def test_resume_without_a_terminal_says_how_to_choose_instead(scripted, env):
    scripted.script.append(Reply(text="Saved."))
    assert (await env.run(*MODEL, "-p", "something")).returncode == 0
    done = await env.run("-r", "-p", "hi")
    assert done.returncode == 1
    assert "--resume needs a terminal" in done.stderr.decode()


async def test_resume_lists_this_directorys_sessions_and_opens_the_chosen_one(scripted, env):
    import os
    import pty

    import trio
    from conftest import CLI

    scripted.script += [Reply(text="Older."), Reply(text="Newer."), Reply(text="Resumed the older one.")]
    assert (await env.run(*MODEL, "-p", "the older session")).returncode == 0
    assert (await env.run(*MODEL, "-p", "the newer session")).returncode == 0
    master, slave = pty.openpty()
    try:
        proc = await trio.lowlevel.open_process(
            [CLI, "-r", "-p", "continue please"], stdin=slave, stdout=slave, stderr=slave, env=env.env, cwd=env.work
        )
        os.close(slave)
        slave = -1
        screen = b""
        with trio.fail_after(60):
            while b"Resume which session?" not in screen:
                await trio.lowlevel.wait_readable(master)
                screen += os.read(master, 4096)
            assert screen.index(b"the newer session") < screen.index(b"the older session")  # newest first
            os.write(master, b"2\n")
            while True:
                await trio.lowlevel.wait_readable(master)
                try:
                    data = os.read(master, 4096)
                except OSError:  # the pty closes when the process exits
                    break
                if not data:
                    break
                screen += data
            assert await proc.wait() == 0
    finally:
        os.close(master)
        if slave >= 0:
            os.close(slave)
    assert b"Resumed the older one." in screen
    assert _sent(scripted, 2)[1:] == [("user", "the older session"), ("assistant", "Older."), ("user", "continue please")]


async def test_export_writes_a_self_contained_html_page_of_a_session(scripted, env):
    scripted.script.append(Reply(text="An <answer> & more."))
    assert (await env.run(*MODEL, "-p", "question <b>bold</b>")).returncode == 0
    (path,) = _session_files(env)
    out = env.work / "page.html"
    done = await env.run("--export", str(path), str(out))
    assert done.returncode == 0 and done.stdout.decode().strip() == f"Exported to: {out}"
    page = out.read_text()
    assert page.startswith("<!doctype html>") and "<style>" in page and "<script src" not in page
    assert "question &lt;b&gt;bold&lt;/b&gt;" in page and "An &lt;answer&gt; &amp; more." in page
    missing = await env.run("--export", str(env.work / "nope.jsonl"))
    assert missing.returncode == 1 and missing.stderr.decode().startswith("Error: Cannot export")


async def test_a_corrupt_session_file_is_a_one_line_error(env):
    bad = env.work / "broken.jsonl"
    bad.write_text("this is not a session\n{}\n")
    done = await env.run("--session", str(bad), "-p", "hi")
    assert done.returncode == 1
    err = done.stderr.decode().strip()
    assert err.startswith(f"Error: Cannot open session {bad}") and len(err.splitlines()) == 1
    assert bad.read_text() == "this is not a session\n{}\n"  # refused, never overwritten


async def test_an_empty_session_file_starts_a_session_in_that_file_and_reopens_with_its_id(scripted, env):
    scripted.script += [Reply(text="Started here."), Reply(text="Still here.")]
    empty = env.work / "mine.jsonl"
    empty.write_bytes(b"")
    first = await env.run(*MODEL, "--session", str(empty), "-p", "one")
    assert first.returncode == 0, first.stderr.decode()
    header, *entries = _lines(empty)
    assert header["type"] == "session" and header["cwd"] == str(env.work)
    assert [e["message"]["role"] for e in entries if e["type"] == "message"] == ["user", "assistant"]
    assert not _session_files(env)  # the given path was kept, nothing written elsewhere
    second = await env.run("--session", str(empty), "-p", "two")
    assert second.returncode == 0, second.stderr.decode()
    assert _lines(empty)[0]["id"] == header["id"]
    assert _sent(scripted, 1)[1:] == [("user", "one"), ("assistant", "Started here."), ("user", "two")]
