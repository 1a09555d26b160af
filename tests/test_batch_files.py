"""``pi-actors batch``'s files and judgements, in process: the task file's one-line errors,
the result log's resume rules, and reading a session's events into an outcome."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys

import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from pi_actors.cli._batch_progress import BatchProgress
from pi_actors.cli._batch_results import ResultLog
from pi_actors.cli._batch_tasks import TaskFileError, parse_task, read_tasks
from pi_actors.placement import (
    Checkout,
    EventFold,
    Limits,
    LocalPlacement,
    SessionJob,
    checkout,
    classify_model_error,
    make_placement,
    rewrite_header_cwd,
)


def _tasks(tmp_path, *lines: str) -> str:
    path = tmp_path / "tasks.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def test_task_lines_are_read_with_their_defaults_and_a_relative_cwd(tmp_path):
    (tmp_path / "repo").mkdir()
    path = _tasks(
        tmp_path,
        '{"id": "a", "prompt": "hi"}',
        "",
        '{"id": "b", "prompts": ["one", "two"], "cwd": "repo", "model": "p/m", "tools": [], "limits": {"turns": 3, "wall_time": 1.5}}',
        '{"id": "c", "prompt": "x", "workspace": {"repo": "https://example.invalid/r.git", "ref": "v1"}}',
    )
    a, b, c = read_tasks(path, base=str(tmp_path))
    assert (a.id, a.prompts, a.cwd, a.tools, a.line) == ("a", ["hi"], str(tmp_path), None, 1)
    assert (b.prompts, b.cwd, b.model, b.tools, b.line) == (["one", "two"], str(tmp_path / "repo"), "p/m", [], 3)
    assert (b.limits.turns, b.limits.tokens, b.limits.wall_time) == (3, None, 1.5)
    assert c.cwd is None and c.workspace is not None and (c.workspace.repo, c.workspace.ref) == ("https://example.invalid/r.git", "v1")


@pytest.mark.parametrize(
    ("line", "says"),
    [
        ('{"id": 7, "prompt": "hi"}', "line 2: field 'id': expected `str`, got `int`"),
        ('{"id": "x", "prompt": "hi", "limits": {"turns": "3"}}', "line 2: field 'limits.turns': expected `int | null`, got `str`"),
        ('{"id": "x", "prompt": "hi", "limits": {"turns": 0}}', "line 2: field 'limits.turns': expected `int` >= 1"),
        ('{"id": "x", "promt": "hi"}', "line 2: unknown field 'promt'"),
        ('{"id": "x", "prompt": "hi", "limits": {"turn": 1}}', "line 2: unknown field 'limits.turn'"),
        ('{"id": "x", "prompt": "a", "prompts": ["b"]}', "line 2: field 'prompt': give exactly one of 'prompt' or 'prompts'"),
        ('{"id": "x"}', "line 2: field 'prompt': give exactly one of 'prompt' or 'prompts'"),
        ('{"id": "x", "prompts": []}', "line 2: field 'prompts': expected `array` of length >= 1"),
        ('{"id": "x", "prompt": "a", "cwd": "no-such-dir"}', "line 2: field 'cwd': "),
        ('{"id": "x", "prompt": "a", "cwd": ".."}', "line 2: field 'cwd': "),  # outside the root: below
        ('{"id": "a", "prompt": "again"}', "line 2: field 'id': 'a' was already given on line 1"),
        ('{"id": "x", "prompt": "a"', "line 2: not a JSON object"),
    ],
)
def test_a_bad_task_line_is_one_error_naming_the_line_and_the_field(tmp_path, line, says):
    path = _tasks(tmp_path, '{"id": "a", "prompt": "hi"}', line)
    with pytest.raises(TaskFileError) as caught:
        read_tasks(path, base=str(tmp_path))
    message = str(caught.value)
    assert message.startswith(f"{path} {says}") and "\n" not in message


def test_a_cwd_outside_the_workspace_root_or_a_driver_path_repo_for_ray_is_refused_at_load(tmp_path):
    (tmp_path / "root" / "proj").mkdir(parents=True)
    (tmp_path / "other").mkdir()
    path = _tasks(tmp_path, '{"id": "in", "prompt": "a", "cwd": "root/proj"}', '{"id": "out", "prompt": "a", "cwd": "other"}')
    with pytest.raises(TaskFileError) as caught:
        read_tasks(path, base=str(tmp_path), root=str(tmp_path / "root"))
    assert str(caught.value) == f"{path} line 2: field 'cwd': {tmp_path / 'other'} is outside the workspace root {tmp_path / 'root'}"
    # For Ray, the cwd is looked for on the nodes, not here; a repository path of the driver is refused.
    missing = _tasks(tmp_path, '{"id": "a", "prompt": "a", "cwd": "root/not-here"}')
    assert read_tasks(missing, base=str(tmp_path), root=str(tmp_path / "root"), remote=True)[0].cwd == str(tmp_path / "root/not-here")
    local_repo = _tasks(tmp_path, '{"id": "a", "prompt": "a", "workspace": {"repo": "repo"}}')
    assert read_tasks(local_repo, base=str(tmp_path))[0].workspace.repo == str(tmp_path / "repo")
    with pytest.raises(TaskFileError) as caught:
        read_tasks(local_repo, base=str(tmp_path), remote=True)
    assert str(caught.value) == (
        f"{local_repo} line 1: field 'workspace.repo': repo is a path on this machine, which the nodes cannot reach; "
        f"give a URL (file://{tmp_path / 'repo'} if every node shares that path)"
    )
    for url in ("https://h/r.git", "file:///srv/r", "git@host:o/r.git", "ssh://git@h/r"):
        line = _tasks(tmp_path, json.dumps({"id": "a", "prompt": "a", "workspace": {"repo": url}}))
        assert read_tasks(line, base=str(tmp_path), remote=True)[0].workspace.repo == url


_line_json = st.fixed_dictionaries(
    {},
    optional={
        k: st.none()
        | st.integers()
        | st.text(max_size=5)
        | st.lists(st.text(max_size=3), max_size=2)
        | st.dictionaries(
            st.sampled_from(["turns", "tokens", "wall_time", "repo", "ref", "x"]), st.integers(-2, 3) | st.text(max_size=3), max_size=3
        )
        for k in ["id", "prompt", "prompts", "cwd", "workspace", "model", "tools", "limits", "extra"]
    },
).map(lambda d: json.dumps(d).encode())


@settings(max_examples=80, deadline=None)
@given(st.binary(max_size=100) | st.text(max_size=100).map(str.encode) | _line_json)
def test_any_bytes_as_a_task_line_give_a_task_or_a_line_error(data):
    try:
        parse_task(data, path="t.jsonl", number=4, base="/")
    except TaskFileError as exc:
        assert str(exc).startswith("t.jsonl line 4: ") and "\n" not in str(exc)


def test_resuming_skips_ids_finished_ok_or_by_the_agent_and_drops_a_half_written_line(tmp_path):
    out = tmp_path / "results.jsonl"
    lines = [
        {"id": "ok", "ok": True, "error_kind": None},
        {"id": "agent", "ok": False, "error_kind": "agent"},
        {"id": "infra", "ok": False, "error_kind": "infra"},
    ]
    out.write_bytes(b"".join(json.dumps(x).encode() + b"\n" for x in lines) + b'{"id": "cut", "ok": tr')
    log = ResultLog.open(str(out))
    try:
        assert log.done == {"ok", "agent"}
        log.append({"id": "infra", "ok": True, "error_kind": None})
        assert log.done == {"ok", "agent", "infra"}
    finally:
        log.close()
    written = out.read_text().splitlines()
    assert len(written) == 4 and json.loads(written[-1])["id"] == "infra" and "cut" not in out.read_text()


def test_a_result_file_that_is_not_ours_is_refused_naming_the_line(tmp_path):
    out = tmp_path / "results.jsonl"
    out.write_text('{"id": "a", "ok": true}\n[1, 2]\n')
    with pytest.raises(ValueError, match=r"results.jsonl line 2: not a result line"):
        ResultLog.open(str(out))


def test_model_errors_are_told_apart_infrastructure_from_agent():
    assert classify_model_error("Connection error: all attempts to connect to 127.0.0.1:9 failed") == "infra"
    assert classify_model_error("503 scripted error 503") == "infra"
    assert classify_model_error("429 rate limited") == "infra"
    assert classify_model_error("Request timed out.") == "infra"
    assert classify_model_error("400 scripted error 400") == "agent"
    assert classify_model_error("The model refused") == "agent"


def test_events_give_the_final_text_summed_usage_turns_and_the_model_error():
    fold = EventFold()
    usage = {"input": 10, "output": 2, "cacheRead": 1, "cacheWrite": 0, "totalTokens": 13, "cost": {"total": 0.5}}
    for event in [
        {"type": "session", "id": "s1"},
        {"type": "turn_start"},
        {"type": "message_end", "message": {"role": "user", "content": [{"type": "text", "text": "q"}]}},
        {"type": "message_end", "message": {"role": "assistant", "content": [{"type": "text", "text": "A"}], "usage": usage}},
        {"type": "turn_start"},
        {
            "type": "message_end",
            "message": {"role": "assistant", "content": [], "usage": usage, "stopReason": "error", "errorMessage": "502 bad gateway"},
        },
        {"type": "agent_end"},
    ]:
        fold.feed(event)
    assert (fold.session_id, fold.turns, fold.runs_ended, fold.text) == ("s1", 2, 1, "")
    assert fold.usage == {"input": 20, "output": 4, "cacheRead": 2, "cacheWrite": 0, "totalTokens": 26} and fold.cost == 1.0
    assert fold.model_error() == ("infra", "502 bad gateway")


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=10),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.sampled_from(["type", "message", "role", "usage", "content", "id", "cost", "total", "text", "stopReason"])
            | st.text(max_size=5),
            inner,
            max_size=5,
        )
    ),
    max_leaves=5,
)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        _json
        | st.fixed_dictionaries(
            {"type": st.sampled_from(["session", "turn_start", "message_end", "agent_end"])}, optional={"message": _json, "id": _json}
        ),
        max_size=8,
    )
)
def test_any_hostile_events_are_folded_without_an_exception(events):
    fold = EventFold()
    for event in events:
        fold.feed(event)
    assert isinstance(fold.text, str) and fold.turns >= 0
    fold.model_error()


def test_a_local_session_gets_its_prompts_after_the_options_so_a_dash_prompt_is_a_message():
    placement = make_placement("local", slots=2, command=["pi-actors"])
    assert isinstance(placement, LocalPlacement) and placement.slots == 2
    job = SessionJob(id="x", prompts=["--help", "@file"], cwd="/w", session_dir="/s", model="p/m", tools=[])
    assert placement.argv(job) == [
        "pi-actors",
        "--mode",
        "json",
        "--session-dir",
        "/s",
        "--model",
        "p/m",
        "--no-tools",
        "--",
        "--help",
        "@file",
    ]


def _stand_in(code: str) -> list[str]:
    """A session command that is a small Python program (its options are left in argv)."""
    return [sys.executable, "-c", code]


async def test_a_session_process_that_dies_is_an_infrastructure_failure(tmp_path):
    died = 'import os, signal; print(\'{"type": "session", "id": "s"}\', flush=True); os.kill(os.getpid(), signal.SIGKILL)'
    placement = LocalPlacement(1, command=_stand_in(died))
    job = SessionJob(id="x", prompts=["hi"], cwd=str(tmp_path), session_dir=str(tmp_path / "s"))
    outcome = await placement.run(job)
    assert (outcome.ok, outcome.error_kind, outcome.error) == (False, "infra", "the session process was killed by SIGKILL")


async def test_a_task_the_cli_refuses_before_starting_is_the_agents_failure(tmp_path):
    refused = "import sys; print('Error: Model \"x/y\" not found.', file=sys.stderr); sys.exit(1)"
    outcome = await LocalPlacement(1, command=_stand_in(refused)).run(
        SessionJob(id="x", prompts=["hi"], cwd=str(tmp_path), session_dir=str(tmp_path / "s"))
    )
    assert (outcome.ok, outcome.error_kind, outcome.error) == (False, "agent", 'Model "x/y" not found.')


async def test_a_session_past_its_wall_time_is_stopped_as_the_agents_failure(tmp_path):
    hangs = 'import time; print(\'{"type": "session", "id": "s"}\', flush=True); time.sleep(600)'
    job = SessionJob(id="x", prompts=["hi"], cwd=str(tmp_path), session_dir=str(tmp_path / "s"), limits=Limits(wall_time=0.2))
    with trio.fail_after(30):
        outcome = await LocalPlacement(1, command=_stand_in(hangs)).run(job)
    assert (outcome.ok, outcome.error_kind, outcome.error) == (False, "agent", "wall time limit (0.2 s) reached")


def _git(*args: str, cwd) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                   env={**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"})  # fmt: skip


async def test_a_workspace_task_gets_a_fresh_checkout_of_its_ref_and_a_bad_ref_is_named(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    _git("init", "-q", cwd=repo)
    (repo / "f.txt").write_text("v1\n")
    _git("add", "f.txt", cwd=repo)
    _git("commit", "-qm", "one", cwd=repo)
    _git("tag", "v1", cwd=repo)
    (repo / "f.txt").write_text("v2\n")
    _git("commit", "-qam", "two", cwd=repo)
    tasks = _tasks(tmp_path, json.dumps({"id": "w", "prompt": "x", "workspace": {"repo": str(repo), "ref": "v1"}}),
                   json.dumps({"id": "bad", "prompt": "x", "workspace": {"repo": str(repo), "ref": "no-such-ref"}}))  # fmt: skip
    good, bad = read_tasks(tasks, base=str(tmp_path))
    target = tmp_path / "ws" / "w-1"
    target.mkdir(parents=True)
    (target / "stale").write_text("from an earlier attempt")
    assert await checkout(good.workspace.repo, good.workspace.ref, str(target)) is None
    assert (target / "f.txt").read_text() == "v1\n" and not (target / "stale").exists()
    failed = await checkout(bad.workspace.repo, bad.workspace.ref, str(tmp_path / "ws" / "bad-1"))
    assert failed is not None and failed.startswith("checkout no-such-ref failed: ") and "\n" not in failed
    # The local placement makes the checkout itself: a failed one is the infrastructure's failure.
    job = SessionJob(id="bad", prompts=["x"], cwd="", session_dir=str(tmp_path / "s"),
                     workspace=Checkout(repo=str(tmp_path / "no-repo"), directory=str(tmp_path / "ws" / "none-1")))  # fmt: skip
    outcome = await LocalPlacement(1, command=_stand_in("raise SystemExit(3)")).run(job)
    assert (outcome.ok, outcome.error_kind) == (False, "infra") and outcome.error.startswith("workspace: clone failed: ")


async def test_a_session_past_its_turn_or_token_limit_is_stopped_as_the_agents_failure(tmp_path):
    reply = {"type": "message_end", "message": {"role": "assistant", "content": [], "usage": {"totalTokens": 60}}}
    turns = (
        "import json, time\n"
        + "".join(f"print(json.dumps({e!r}), flush=True)\n" for e in [{"type": "session", "id": "s"}, {"type": "turn_start"}, reply] * 3)
        + "time.sleep(600)\n"
    )
    for limits, says in [(Limits(turns=2), "turn limit (2) reached"), (Limits(tokens=100), "token limit (100) reached: 120 tokens used")]:
        job = SessionJob(id="x", prompts=["hi"], cwd=str(tmp_path), session_dir=str(tmp_path / "s"), limits=limits)
        with trio.fail_after(30):
            outcome = await LocalPlacement(1, command=_stand_in(turns)).run(job)
        assert (outcome.ok, outcome.error_kind, outcome.error) == (False, "agent", says)


@pytest.mark.parametrize("live", [True, False])
def test_the_progress_display_shows_done_failed_running_and_the_rate(live):
    stream = io.StringIO()
    ok = {"id": "a", "ok": True, "attempt": 1, "seconds": 1.0, "error_kind": None, "error": None}
    infra = {"id": "b", "ok": False, "attempt": 1, "seconds": 1.0, "error_kind": "infra", "error": "503 overloaded"}
    with BatchProgress(3, 1, stream=stream, live=live) as progress:
        progress.started("a", 1)
        progress.started("b", 1)
        progress.finished(ok, final=True)
        progress.finished(infra, final=False)
    shown = stream.getvalue()
    if live:
        assert "1/3" in shown and "failed 0 · running 0" in shown and "/s" in shown
    else:
        assert shown.startswith("batch: 3 tasks to run, 1 already done\n")
        assert "batch: a ok [attempt 1, 1.0 s] 1/3 done, 0 failed, 1 running, " in shown and "ETA " in shown
        assert "batch: b infra failure: 503 overloaded (retrying) [attempt 1, 1.0 s] 1/3 done, 0 failed, 0 running" in shown
    assert shown.endswith("batch: 1 done, 0 failed, in " + shown.rsplit(" in ", 1)[1])


def test_a_session_header_gets_the_drivers_cwd_and_every_other_byte_is_kept(tmp_path):
    file = tmp_path / "s.jsonl"
    header = {"type": "session", "version": 3, "id": "i", "timestamp": "t", "cwd": "/node/root/proj"}
    rest = '{"type":"message","id":"a","message":{"role":"user","content":"é /node/root/proj"}}\n{"type":"x"}\n'
    file.write_text(json.dumps(header) + "\n" + rest)
    file.chmod(0o600)
    rewrite_header_cwd(str(file), "/driver/root/proj")
    first, _, after = file.read_text().partition("\n")
    assert json.loads(first) == {**header, "cwd": "/driver/root/proj"} and after == rest
    assert file.stat().st_mode & 0o777 == 0o600 and os.listdir(tmp_path) == ["s.jsonl"]
    other = tmp_path / "s.jsonl"
    other.write_text('{"type":"message"}\n')
    rewrite_header_cwd(str(other), "/x")  # not a session file: left alone
    assert other.read_text() == '{"type":"message"}\n'
