"""``pi-actors batch --ray``: the real CLI as the driver, each task a real headless session
placed by Ray on a local three-node cluster (``tests/support/ray_cluster.py``: a head and two
workers started with ``ray start``, token auth) against the scripted model.

Sessions ask for the ``pi_worker`` resource, so they run on the two worker nodes only: the
driver is attached to the head's raylet, which must survive the node killed below. The
tests share one cluster (module scope, one xdist group) and run in file order: the node
kill comes last."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import trio
from _procs import cmdline, environ_has, live_pids, wait_all_gone
from conftest import Env
from support.providers import last_tool_output
from support.ray_cluster import RayCluster, ray_cluster_fixture

from pi_actors.cli.batch import parse_size
from pi_actors.placement import PlacementError, make_placement, shipped_environment
from pi_actors.testing.scripted_server import Reply, ScriptedLLM
from pi_actors.testing.wire_formats import ScriptToolCall

pytestmark = pytest.mark.xdist_group("ray")

CLI = str(Path(sys.executable).with_name("pi-actors"))

ray_cluster = ray_cluster_fixture(workers=2)


def _first_user_text(body) -> str:
    for message in (body or {}).get("messages", []):
        if message.get("role") == "user":
            content = message["content"]
            return content if isinstance(content, str) else "".join(p.get("text", "") for p in content)
    return ""


class _ByPrompt:
    """The scripted model: each request answered by the task (its first prompt) it belongs to;
    ``arrived[task]`` is set when that task's first request comes."""

    def __init__(self, answers) -> None:
        self.answers = answers
        self.asked: dict[str, int] = {}
        self.arrived = {task: trio.Event() for task in answers}

    def __call__(self, body) -> Reply:
        task = _first_user_text(body)
        self.asked[task] = self.asked.get(task, 0) + 1
        self.arrived[task].set()
        return self.answers[task](self.asked[task], body)


async def _setup(tmp_path, nursery, cluster: RayCluster, answers, tasks: list[dict]):
    script = _ByPrompt(answers)
    server = ScriptedLLM(script)
    await nursery.start(server.serve)
    env = Env(tmp_path, server)
    (env.home / "settings.json").write_text(json.dumps({"retry": {"enabled": False}}))
    env.env.update(cluster.env)
    path = env.work / "tasks.jsonl"
    path.write_text("".join(json.dumps(t) + "\n" for t in tasks))
    return env, server, script, path


def _argv(cluster: RayCluster, tasks: Path, out: Path, *extra: str) -> list[str]:
    return [CLI, "batch", str(tasks), "--out", str(out), "--ray", cluster.address, "--resources", '{"pi_worker": 1}', *extra]


def _results(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _sessions(marker: str) -> list[int]:
    """Live session, tool and sandbox processes of one test (they carry its marker)."""
    return live_pids(lambda pid: environ_has(pid, f"PI_ACTORS_TEST_MARKER={marker}"))


async def test_a_ray_batch_spreads_sessions_over_the_nodes_and_brings_their_files_back(tmp_path, nursery, ray_cluster):
    def tool_then_answer(n, body):
        if n == 1:
            return Reply(tool_calls=[ScriptToolCall(id="c1", name="bash", arguments={"command": "env"})])
        return Reply(text="env shown")

    answers = {"say hello": lambda n, body: Reply(text="hello"), "show env": tool_then_answer}
    # Two tasks at once: each worker node holds one session (one `pi_worker`), so one runs on each.
    tasks = [{"id": "hello", "prompt": "say hello", "model": "scripted/scripted-model", "tools": []}]
    # The key of this model is named in models.json: it is shipped to the session's node.
    tasks.append({"id": "env", "prompt": "show env", "model": "scripted-anthropic/scripted-claude", "tools": ["bash"]})
    env, server, script, path = await _setup(tmp_path, nursery, ray_cluster, answers, tasks)
    out = env.work / "results.jsonl"
    with trio.fail_after(120):
        done = await trio.run_process(
            _argv(ray_cluster, path, out, "--per-session-cpus", "1"), capture_stdout=True, capture_stderr=True,
            check=False, env=env.env, cwd=env.work,
        )  # fmt: skip
    err = done.stderr.decode()
    assert done.returncode == 0, err
    results = _results(out)
    assert sorted(r["id"] for r in results) == ["env", "hello"], err
    assert all(r["ok"] and r["attempt"] == 1 and r["error_kind"] is None for r in results), results
    assert {r["id"]: r["text"] for r in results} == {"hello": "hello", "env": "env shown"}
    nodes = {r["node"] for r in results}
    assert len(nodes) == 2 and all(n.count("/") == 1 for n in nodes), nodes  # ip/node id, both workers

    # Each session file came back by value and is under --session-dir's default.
    for r in results:
        assert "session_content" not in r
        file = Path(r["session_file"])
        assert file.is_relative_to(out.with_name("results.jsonl.sessions")) and file.is_file()
        roles = [json.loads(line)["message"]["role"] for line in file.read_text().splitlines() if '"type":"message"' in line]
        assert roles[0] == "user" and roles[-1] == "assistant"

    # The provider got its key (from the driver's environment); the tool's environment did not.
    anthropic = [r for r in server.requests if r["path"].endswith("/v1/messages")]
    assert anthropic and all(r["headers"].get("authorization") == "Bearer anthropic-test-key" for r in anthropic)
    tool_output = json.dumps(anthropic[-1]["body"]["messages"][-1])
    assert "PATH=" in tool_output and "anthropic-test-key" not in tool_output and "RAY_AUTH_TOKEN" not in tool_output
    assert ray_cluster.env["RAY_AUTH_TOKEN"] not in tool_output

    assert await wait_all_gone(lambda: _sessions(env.marker)) == []


async def test_ctrl_c_on_a_ray_batch_cancels_its_task_and_the_session_is_gone(tmp_path, nursery, ray_cluster):
    env, server, script, path = await _setup(
        tmp_path, nursery, ray_cluster, {"hang": lambda n, body: Reply(hang_before_headers=True)},
        [{"id": "h", "prompt": "hang", "model": "scripted/scripted-model", "tools": []}],
    )  # fmt: skip
    out = env.work / "results.jsonl"
    with trio.fail_after(90):
        driver = await trio.lowlevel.open_process(_argv(ray_cluster, path, out), env=env.env, cwd=env.work, stderr=subprocess.PIPE)
        await script.arrived["hang"].wait()
        session = [p for p in _sessions(env.marker) if "--mode json" in cmdline(p)]
        assert len(session) == 1 and ray_cluster.node_of(session[0]) in ray_cluster.workers
        driver.send_signal(signal.SIGINT)
        assert await driver.wait() == 130
        # The session on the worker node went away: its hanging request was abandoned.
        await server.wait_hung_up(1)
    assert await wait_all_gone(lambda: _sessions(env.marker)) == []
    assert not out.read_text()  # nothing finished; the next run does the task


def _bash_then_tell(command: str):
    def answer(n, body) -> Reply:
        if n == 1:
            return Reply(tool_calls=[ScriptToolCall(id="c1", name="bash", arguments={"command": command})])
        return Reply(text=last_tool_output(body))

    return answer


def _git(*args: str, cwd) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                   env={**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"})  # fmt: skip


async def test_a_ray_task_is_checked_out_on_its_node_and_a_cwd_is_found_under_the_nodes_root(tmp_path, nursery, ray_cluster):
    repo = tmp_path / "repo"
    repo.mkdir()
    _git("init", "-q", cwd=repo)
    (repo / "f.txt").write_text("version one\n")
    _git("add", "f.txt", cwd=repo)
    _git("commit", "-qm", "one", cwd=repo)
    _git("tag", "v1", cwd=repo)
    (repo / "f.txt").write_text("version two\n")
    _git("commit", "-qam", "two", cwd=repo)
    tasks = [
        {"id": "git", "prompt": "what version", "workspace": {"repo": f"file://{repo}", "ref": "v1"}, "tools": ["bash"]},
        {"id": "rel", "prompt": "where am i", "cwd": "proj", "tools": ["bash"]},
    ]
    tasks = [{"model": "scripted/scripted-model", **t} for t in tasks]
    answers = {"what version": _bash_then_tell("pwd; cat f.txt"), "where am i": _bash_then_tell("pwd; cat marker")}
    env, server, script, path = await _setup(tmp_path, nursery, ray_cluster, answers, tasks)
    (env.work / "proj").mkdir()  # the driver's copy; the nodes' root is elsewhere
    node_root = tmp_path / "node-root"
    (node_root / "proj").mkdir(parents=True)
    (node_root / "proj" / "marker").write_text("node copy\n")
    out = env.work / "results.jsonl"
    with trio.fail_after(120):
        done = await trio.run_process(
            _argv(ray_cluster, path, out, "--node-workspace-root", str(node_root)), capture_stdout=True,
            capture_stderr=True, check=False, env=env.env, cwd=env.work,
        )  # fmt: skip
    err = done.stderr.decode()
    assert done.returncode == 0, err
    results = {r["id"]: r for r in _results(out)}
    assert sorted(results) == ["git", "rel"] and all(r["ok"] and r["node"] for r in results.values()), results
    # The checkout was made by the task on its node, in its private directory, removed at its end;
    # nothing was cloned on the driver.
    where, *said = results["git"]["text"].split()
    assert said == ["version", "one"] and where.endswith("/workspace") and "/pi-actors-ray-" in where, where
    assert not Path(where).is_relative_to(tmp_path) and not os.path.exists(os.path.dirname(where))
    assert not out.with_name("results.jsonl.workspaces").exists()
    # The cwd was resolved under the nodes' root; the file that came back names the driver's directory.
    assert results["rel"]["text"].split() == [str(node_root / "proj"), "node", "copy"]
    header = json.loads(Path(results["rel"]["session_file"]).read_text().splitlines()[0])
    assert header["cwd"] == str(env.work / "proj")
    assert await wait_all_gone(lambda: _sessions(env.marker)) == []


async def test_a_node_killed_mid_batch_loses_no_task_and_leaves_no_stray_process(tmp_path, nursery, ray_cluster):
    answers = {"victim": lambda n, body: Reply(hang_before_headers=True) if n == 1 else Reply(text="victim done")}
    answers["other"] = lambda n, body: Reply(text="other done")
    tasks = [{"id": "victim", "prompt": "victim", "model": "scripted/scripted-model", "tools": ["read"]},
             {"id": "other", "prompt": "other", "model": "scripted/scripted-model", "tools": []}]  # fmt: skip
    env, server, script, path = await _setup(tmp_path, nursery, ray_cluster, answers, tasks)
    out = env.work / "results.jsonl"
    with trio.fail_after(150):
        driver = await trio.lowlevel.open_process(
            _argv(ray_cluster, path, out, "--max-retries", "2"), env=env.env, cwd=env.work, stderr=subprocess.PIPE
        )
        await script.arrived["victim"].wait()
        victim = [p for p in _sessions(env.marker) if cmdline(p).endswith("-- victim")]
        assert len(victim) == 1
        node = ray_cluster.node_of(victim[0])
        assert node in ray_cluster.workers
        ray_cluster.kill_raylet(node)  # kill -9 the node's raylet while the victim runs there
        await server.wait_hung_up(1)  # the session died with its node
        assert driver.stderr is not None
        err = b""
        while chunk := await driver.stderr.receive_some():
            err += chunk
        code = await driver.wait()
    text = err.decode()
    assert code == 0, text
    results = _results(out)
    assert sorted(r["id"] for r in results) == ["other", "victim"], text
    lost = {r["id"]: r for r in results}["victim"]
    assert lost["ok"] and lost["attempt"] == 2 and lost["text"] == "victim done"
    assert "batch: victim infra failure: the Ray task was lost" in text and "(retrying)" in text
    assert script.asked["victim"] == 2
    assert await wait_all_gone(lambda: _sessions(env.marker)) == []
    assert not [p for p in ray_cluster.processes() if "pi-actors" in cmdline(p) or "bwrap" in cmdline(p)]


def _batch_cli(tmp_path, *args: str) -> subprocess.CompletedProcess:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text('{"id": "a", "prompt": "hi"}\n')
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    return subprocess.run([CLI, "batch", str(tasks), "--out", str(tmp_path / "r.jsonl"), *args],
                          capture_output=True, text=True, env=env, timeout=60)  # fmt: skip


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--per-session-cpus", "1"], "--per-session-cpus needs --ray ADDRESS"),
        (["--local", "2", "--ray", "auto"], "give one of --local or --ray"),
        (["--ray", "auto", "--per-session-memory", "lots"], "--per-session-memory must be a size like 2G, 512M or a number of bytes, not 'lots'"),
        (["--ray", "auto", "--resources", '{"gpu": -1}'], "--resources must be a JSON object of positive amounts"),
        (["--ray", "auto", "--per-session-cpus", "0"], "--per-session-cpus must be more than 0, not 0"),
    ],
)
def test_bad_ray_flags_are_one_error_line_before_any_cluster_is_reached(tmp_path, args, says):
    done = _batch_cli(tmp_path, *args)
    assert done.returncode == 1 and done.stderr.startswith(f"Error: {says}") and done.stderr.count("\n") == 1, done.stderr


def test_a_ray_cluster_that_does_not_answer_is_one_error_line_at_once(tmp_path):
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    done = _batch_cli(tmp_path, "--ray", f"127.0.0.1:{port}")
    assert done.returncode == 1
    assert done.stderr == f"Error: cannot connect to the Ray cluster at 127.0.0.1:{port}: Connection refused\n"


def test_without_ray_installed_the_ray_placement_names_the_extra_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    with pytest.raises(PlacementError) as caught:
        make_placement("ray", address="auto")
    assert str(caught.value) == "Ray placement needs Ray: pip install 'pi-actors[ray]'"


def test_sizes_and_the_environment_shipped_to_a_node():
    assert (parse_size("2G"), parse_size("512M"), parse_size("1.5k"), parse_size("4096")) == (2 << 30, 512 << 20, 1536, 4096)
    models = json.dumps({"providers": {"p": {"apiKey": "MY_PROVIDER_SECRET", "headers": {"x-org": "ORG_ID_VAR"}}}}).encode()
    environ = {
        "OPENAI_API_KEY": "k1", "MY_PROVIDER_SECRET": "k2", "ORG_ID_VAR": "org", "PI_ACTORS_OFFLINE": "1",
        "PI_ACTORS_DIR": "/home/me/.pi-actors", "RAY_AUTH_TOKEN": "cluster", "HOME": "/home/me", "PATH": "/bin",
    }  # fmt: skip
    assert shipped_environment(environ, models) == {
        "OPENAI_API_KEY": "k1", "MY_PROVIDER_SECRET": "k2", "ORG_ID_VAR": "org", "PI_ACTORS_OFFLINE": "1",
    }  # fmt: skip
