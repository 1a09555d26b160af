"""``pi-actors batch`` end to end: the real CLI as the driver, each task a real headless
session (``--local``) against the scripted model, whose answers depend on the task's prompt
so that tasks running side by side get their own."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import trio
from conftest import Env
from support.providers import last_tool_output

from pi_actors.coding.session import session_info
from pi_actors.testing.scripted_server import Reply, ScriptedLLM
from pi_actors.testing.wire_formats import ScriptToolCall

CLI = str(Path(sys.executable).with_name("pi-actors"))


def _first_user_text(body) -> str:
    for message in (body or {}).get("messages", []):
        if message.get("role") == "user":
            content = message["content"]
            return content if isinstance(content, str) else "".join(p.get("text", "") for p in content)
    return ""


def _last_user_text(body) -> str:
    users = [m for m in (body or {}).get("messages", []) if m.get("role") == "user"]
    content = users[-1]["content"] if users else ""
    return content if isinstance(content, str) else "".join(p.get("text", "") for p in content)


class _ByPrompt:
    """The scripted model: each request answered by the task (its first prompt) it belongs to."""

    def __init__(self, answers) -> None:
        self.answers = answers
        self.asked: dict[str, int] = {}

    def __call__(self, body) -> Reply:
        task = _first_user_text(body)
        self.asked[task] = self.asked.get(task, 0) + 1
        return self.answers[task](self.asked[task], body)


async def _batch_env(tmp_path, nursery, answers) -> tuple[Env, ScriptedLLM, _ByPrompt]:
    script = _ByPrompt(answers)
    server = ScriptedLLM(script)
    await nursery.start(server.serve)
    env = Env(tmp_path, server)
    # The CLI's own auto-retry would hide the failures the batch is to judge.
    (env.home / "settings.json").write_text(json.dumps({"retry": {"enabled": False}}))
    return env, server, script


def _write_tasks(env: Env, tasks: list[dict]) -> Path:
    path = env.work / "tasks.jsonl"
    path.write_text("".join(json.dumps({"model": "scripted/scripted-model", **t}) + "\n" for t in tasks))
    return path


def _results(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


async def _run(env: Env, *args: str) -> trio.CompletedProcess:
    with trio.fail_after(180):
        return await trio.run_process(
            [CLI, "batch", *args], capture_stdout=True, capture_stderr=True, check=False, env=env.env, cwd=env.work
        )


async def test_a_batch_on_two_local_slots_records_every_task_and_retries_only_infrastructure_failures(tmp_path, nursery):
    env, server, script = await _batch_env(tmp_path, nursery, {
        "two prompts": lambda n, body: Reply(text=f"answer to {_last_user_text(body)}"),
        # An overloaded server (503) is the infrastructure's failure: the task runs again.
        "flaky": lambda n, body: Reply(status=503) if n == 1 else Reply(text="recovered"),
        # A client error (400) is the agent's: final at once.
        "refused": lambda n, body: Reply(status=400),
    })  # fmt: skip
    tasks = _write_tasks(env, [
        {"id": "multi", "prompts": ["two prompts", "and the second"], "tools": []},
        {"id": "flaky", "prompt": "flaky", "tools": []},
        {"id": "refused", "prompt": "refused", "tools": []},
    ])  # fmt: skip
    out = env.work / "results.jsonl"
    done = await _run(env, str(tasks), "--out", str(out), "--local", "2", "--max-retries", "2")
    assert done.returncode == 1, done.stderr.decode()  # a task failed
    results = {r["id"]: r for r in _results(out)}
    assert sorted(results) == ["flaky", "multi", "refused"] and len(_results(out)) == 3

    multi = results["multi"]
    assert multi["ok"] is True and multi["error_kind"] is None and multi["attempt"] == 1
    assert multi["text"] == "answer to and the second" and multi["turns"] == 2
    assert multi["usage"]["totalTokens"] > 0 and multi["cost"] == 0.0 and multi["node"]
    assert multi["ended_at"] >= multi["started_at"] and multi["seconds"] >= 0
    session = [json.loads(line) for line in Path(multi["session_file"]).read_text().splitlines()]
    assert Path(multi["session_file"]).is_relative_to(env.work / "results.jsonl.sessions")
    assert [e["message"]["role"] for e in session if e["type"] == "message"] == ["user", "assistant", "user", "assistant"]

    assert results["flaky"]["ok"] is True and results["flaky"]["attempt"] == 2 and results["flaky"]["text"] == "recovered"
    assert script.asked["flaky"] == 2

    refused = results["refused"]
    assert (refused["ok"], refused["error_kind"], refused["attempt"]) == (False, "agent", 1)
    assert refused["error"].startswith("400") and script.asked["refused"] == 1

    err = done.stderr.decode()
    assert "batch: 3 tasks to run, 0 already done" in err
    assert "batch: flaky infra failure: 503" in err and "(retrying)" in err
    assert "batch: refused agent failure: 400" in err
    assert "batch: 3 done, 1 failed" in err

    # Running the same command again finds nothing left to do.
    again = await _run(env, str(tasks), "--out", str(out), "--local", "2")
    assert "batch: 0 tasks to run, 3 already done" in again.stderr.decode() and len(_results(out)) == 3


async def test_a_batch_whose_driver_was_killed_resumes_and_does_every_task_exactly_once(tmp_path, nursery):
    env, server, script = await _batch_env(tmp_path, nursery, {
        "first": lambda n, body: Reply(text="first done"),
        # The first attempt hangs until its session goes away with the killed driver.
        "second": lambda n, body: Reply(hang_before_headers=True) if n == 1 else Reply(text="second done"),
        "third": lambda n, body: Reply(text="third done"),
    })  # fmt: skip
    tasks = _write_tasks(env, [{"id": name, "prompt": name, "tools": []} for name in ("first", "second", "third")])
    out = env.work / "results.jsonl"
    argv = [CLI, "batch", str(tasks), "--out", str(out), "--local", "1"]
    with trio.fail_after(180):
        driver = await trio.lowlevel.open_process(argv, env=env.env, cwd=env.work, stderr=subprocess.DEVNULL)
        # One slot: the second task's request comes once the first's result is on disk.
        await server.wait_requests(2)
        assert [r["id"] for r in _results(out)] == ["first"]
        os.kill(driver.pid, signal.SIGKILL)
        await driver.wait()
        # The running session died with its driver: its hanging request was abandoned.
        await server.wait_hung_up(1)

        done = await _run(env, str(tasks), "--out", str(out), "--local", "1")
    assert done.returncode == 0, done.stderr.decode()
    assert "batch: 2 tasks to run, 1 already done" in done.stderr.decode()
    results = _results(out)
    assert sorted(r["id"] for r in results) == ["first", "second", "third"]
    assert all(r["ok"] for r in results) and {r["id"]: r["text"] for r in results}["second"] == "second done"
    assert script.asked == {"first": 1, "second": 2, "third": 1}


def _bash_then_tell(command: str):
    """A model that runs ``command`` with bash and answers with its output, on every prompt."""

    def answer(n, body) -> Reply:
        if n % 2:
            return Reply(tool_calls=[ScriptToolCall(id=f"c{n}", name="bash", arguments={"command": command})])
        return Reply(text=last_tool_output(body))

    return answer


def _git(*args: str, cwd) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                   env={**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"})  # fmt: skip


async def test_a_task_cwd_runs_under_the_node_root_and_its_session_file_resumes_in_the_drivers_directory(tmp_path, nursery):
    env, server, script = await _batch_env(tmp_path, nursery, {
        "where am i": _bash_then_tell("pwd; cat marker"), "what version": _bash_then_tell("pwd; cat f.txt"),
    })  # fmt: skip
    # The driver's workspace root is its directory (the default); the "node" has its own copy elsewhere.
    (env.work / "proj").mkdir()
    (env.work / "proj" / "marker").write_text("driver copy\n")
    node_root = tmp_path / "node-root"
    (node_root / "proj").mkdir(parents=True)
    (node_root / "proj" / "marker").write_text("node copy\n")
    repo = tmp_path / "repo"  # a git workspace: checked out by the placement, fresh per attempt
    repo.mkdir()
    _git("init", "-q", cwd=repo)
    (repo / "f.txt").write_text("version one\n")
    _git("add", "f.txt", cwd=repo)
    _git("commit", "-qm", "one", cwd=repo)
    _git("tag", "v1", cwd=repo)
    (repo / "f.txt").write_text("version two\n")
    _git("commit", "-qam", "two", cwd=repo)
    tasks = _write_tasks(env, [
        {"id": "rel", "prompt": "where am i", "cwd": "proj", "tools": ["bash"]},
        {"id": "git", "prompt": "what version", "workspace": {"repo": "../repo", "ref": "v1"}, "tools": ["bash"]},
    ])  # fmt: skip
    out = env.work / "results.jsonl"
    done = await _run(env, str(tasks), "--out", str(out), "--local", "2", "--node-workspace-root", str(node_root))
    assert done.returncode == 0, done.stderr.decode()
    results = {r["id"]: r for r in _results(out)}
    # The session ran in the node root's copy of the task's directory...
    assert results["rel"]["ok"] and results["rel"]["text"].split() == [str(node_root / "proj"), "node", "copy"]
    checkout = env.work / "results.jsonl.workspaces" / "git-1"
    assert results["git"]["ok"] and results["git"]["text"].split() == [str(checkout), "version", "one"]
    # ...and its file's header names the driver's directory, which the session file resumes in.
    file = results["rel"]["session_file"]
    assert json.loads(Path(file).read_text().splitlines()[0])["cwd"] == str(env.work / "proj")
    assert session_info(file).cwd == str(env.work / "proj")
    with trio.fail_after(60):
        resumed = await trio.run_process(
            [CLI, "--session", file, "--model", "scripted/scripted-model", "-p", "and now?"], capture_stdout=True,
            capture_stderr=True, check=False, env=env.env, cwd=env.work / "proj",
        )  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr.decode()
    assert resumed.stdout.decode().split() == [str(env.work / "proj"), "driver", "copy"]
    assert script.asked["where am i"] == 4 and "and now?" in json.dumps(server.requests[-1]["body"])


async def test_a_bad_task_line_stops_the_batch_before_any_session_with_one_line(tmp_path, nursery):
    env, server, _ = await _batch_env(tmp_path, nursery, {})
    tasks = env.work / "tasks.jsonl"
    tasks.write_text('{"id": "a", "prompt": "hi"}\n{"id": "b", "prompt": "hi", "limits": {"turns": -1}}\n')
    done = await _run(env, str(tasks), "--out", str(env.work / "r.jsonl"), "--local", "2")
    assert done.returncode == 1 and not server.requests
    assert done.stderr.decode() == f"Error: {tasks} line 2: field 'limits.turns': expected `int` >= 1\n"
