"""One writer per session file: a second pi-actors that opens a session another one has open
for writing is refused with one line naming the holder's pid; the lock dies with its process."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest
import trio
from _procs import live_pids, parent_pid, wait_exited
from conftest import CLI, actor_config
from support.wire import content_text

from pi_actors.coding.session import SessionLocked, SessionWriter, load_session, lock_holder
from pi_actors.runtime import RemoteError, leaf_exceptions
from pi_actors.testing.scripted_server import Reply

MODEL = ("--model", "scripted/scripted-model")


def _user(text: str) -> dict:
    return {"role": "user", "content": text, "timestamp": 1}


def _session_files(env) -> list:
    return sorted((env.home / "sessions").glob("*/*.jsonl"))


def _sent(scripted, index: int) -> list[tuple[str, str]]:
    return [(m["role"], content_text(m["content"])) for m in scripted.requests[index]["body"]["messages"]]


class Rpc:
    """A ``pi-actors --mode rpc`` process: send commands, read its output lines."""

    def __init__(self, proc: trio.Process) -> None:
        self.proc = proc
        self.buffer = b""

    @classmethod
    async def start(cls, env, *args: str) -> Rpc:
        proc = await trio.lowlevel.open_process(
            [CLI, "--mode", "rpc", *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            env=env.env, cwd=env.work,
        )  # fmt: skip
        return cls(proc)

    async def request(self, obj: dict) -> dict:
        await self.proc.stdin.send_all(json.dumps(obj).encode() + b"\n")
        with trio.fail_after(60):
            while True:
                while b"\n" not in self.buffer:
                    data = await self.proc.stdout.receive_some()
                    assert data, "the RPC process closed its output"
                    self.buffer += data
                line, self.buffer = self.buffer.split(b"\n", 1)
                message = json.loads(line)
                if message.get("type") == "response" and message.get("id") == obj.get("id"):
                    return message

    async def until(self, kind: str) -> dict:
        with trio.fail_after(60):
            while True:
                while b"\n" not in self.buffer:
                    data = await self.proc.stdout.receive_some()
                    assert data, "the RPC process closed its output"
                    self.buffer += data
                line, self.buffer = self.buffer.split(b"\n", 1)
                message = json.loads(line)
                if message.get("type") == kind:
                    return message

    async def close(self) -> int:
        await self.proc.stdin.aclose()
        with trio.fail_after(60):
            while await self.proc.stdout.receive_some():
                pass
            return await self.proc.wait()


async def _one_saved_session(scripted, env):
    scripted.script.append(Reply(text="First answer."))
    first = await env.run(*MODEL, "-p", "one")
    assert first.returncode == 0, first.stderr.decode()
    (path,) = _session_files(env)
    return path


# -- the real CLI -------------------------------------------------------------------------------


async def test_a_second_continue_is_refused_while_another_pi_actors_has_the_session_open(scripted, env):
    path = await _one_saved_session(scripted, env)
    session_id = load_session(str(path)).header["id"]
    holder = await Rpc.start(env, "-c")
    try:
        state = await holder.request({"id": "s", "type": "get_state"})  # answered once the session is open
        assert state["success"] and state["data"]["sessionFile"] == str(path)
        before = path.read_bytes()

        second = await env.run("-c", "-p", "two")

        assert second.returncode == 1
        assert second.stdout == b""
        assert second.stderr.decode() == (
            f"Error: session {session_id[:8]} is open in another pi-actors process (pid {holder.proc.pid}); "
            f"close it or use --fork {session_id[:8]}\n"
        )
        assert path.read_bytes() == before  # the refused run wrote nothing
        assert len(scripted.requests) == 1  # and asked the model nothing
    finally:
        assert await holder.close() == 0

    scripted.script.append(Reply(text="Second answer."))
    third = await env.run("-c", "-p", "two")  # the holder has exited: the session is free again
    assert third.returncode == 0, third.stderr.decode()
    assert _sent(scripted, 1)[1:] == [("user", "one"), ("assistant", "First answer."), ("user", "two")]
    assert not os.path.exists(str(path) + ".lock")


async def test_a_session_held_by_a_killed_pi_actors_can_be_continued_at_once(scripted, env):
    path = await _one_saved_session(scripted, env)
    holder = await Rpc.start(env, "--session", str(path))
    state = await holder.request({"id": "s", "type": "get_state"})
    assert state["data"]["sessionFile"] == str(path)
    assert lock_holder(str(path)) == holder.proc.pid
    actors = live_pids(lambda pid: parent_pid(pid) == holder.proc.pid)
    holder.proc.send_signal(signal.SIGKILL)  # no clean-up of any kind
    with trio.fail_after(60):
        await holder.proc.wait()
    # Its actors get SIGKILL from the kernel when it dies; the lock goes with the coordinator
    # (which runs the store).
    await wait_exited(actors, timeout=60)
    assert lock_holder(str(path)) is None
    scripted.script.append(Reply(text="Continued."))
    done = await env.run("-c", "-p", "after the crash")
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout.decode() == "Continued.\n"
    assert _sent(scripted, 1)[1:] == [("user", "one"), ("assistant", "First answer."), ("user", "after the crash")]


async def test_fork_of_a_session_that_is_open_elsewhere_works_and_leaves_it_alone(scripted, env):
    path = await _one_saved_session(scripted, env)
    holder = await Rpc.start(env, "-c")
    try:
        await holder.request({"id": "s", "type": "get_state"})
        before = path.read_bytes()
        scripted.script.append(Reply(text="On the fork."))
        forked = await env.run("--fork", str(path), "-p", "diverge")
        assert forked.returncode == 0, forked.stderr.decode()
        assert path.read_bytes() == before
        assert len(_session_files(env)) == 2
    finally:
        assert await holder.close() == 0


# -- the session store, behind the CLI's early check --------------------------------------------


async def test_the_session_store_refuses_a_file_another_writer_holds(scripted, tmp_path):
    """The CLI's check before start-up is a courtesy; the store's lock is the guarantee."""
    from pi_actors.actors import open_local_runtime

    with SessionWriter.create(str(tmp_path), str(tmp_path), lazy=False) as held:
        held.append_message(_user("mine"))
        before = open(held.path, "rb").read()
        config = actor_config(scripted, tmp_path, session={"sessionDir": str(tmp_path), "agentDir": str(tmp_path), "resume": held.path})
        async with open_local_runtime(config, store_with_coordinator=True) as coordinator:
            with pytest.raises(RemoteError) as refused:
                await coordinator.call("session")
        assert f"is open in another pi-actors process (pid {os.getpid()})" in refused.value.message
        assert open(held.path, "rb").read() == before


async def test_a_session_taken_after_the_clis_check_is_still_a_one_line_refusal(scripted, tmp_path):
    """Between the CLI's check and the store's open another process may take the session:
    the print mode then ends with the same one line (main prints the UsageError)."""
    from pi_actors.cli._render import PrintRenderer
    from pi_actors.cli.main import UsageError, run_prompts

    with SessionWriter.create(str(tmp_path), str(tmp_path), lazy=False) as held:
        held.append_message(_user("mine"))
        config = actor_config(scripted, tmp_path, session={"sessionDir": str(tmp_path), "agentDir": str(tmp_path), "resume": held.path})
        try:
            await run_prompts(config, ["hi"], PrintRenderer())
        except BaseException as exc:
            leaves = leaf_exceptions(exc)
        else:
            pytest.fail("the run was not refused")
    assert len(leaves) == 1 and isinstance(leaves[0], UsageError)
    short = held.session_id[:8]
    assert str(leaves[0]) == f"session {short} is open in another pi-actors process (pid {os.getpid()}); close it or use --fork {short}"
    assert scripted.requests == []


async def test_switching_to_a_session_open_elsewhere_is_refused_and_the_current_one_goes_on(scripted, env):
    other = await _one_saved_session(scripted, env)
    scripted.script += [Reply(text="Here."), Reply(text="Still here.")]
    rpc = await Rpc.start(env, *MODEL)
    try:
        first = await rpc.request({"id": "p1", "type": "prompt", "message": "current session"})
        assert first["success"]
        await rpc.until("agent_end")
        with SessionWriter.resume(str(other)):  # another writer holds the other session
            refused = await rpc.request({"id": "sw", "type": "switch_session", "sessionPath": str(other)})
        assert not refused["success"] and f"(pid {os.getpid()})" in refused["error"]
        # The run goes on in the session it had, with its whole context.
        second = await rpc.request({"id": "p2", "type": "prompt", "message": "and again"})
        assert second["success"]
        await rpc.until("agent_end")
    finally:
        assert await rpc.close() == 0
    assert _sent(scripted, 2)[1:] == [("user", "current session"), ("assistant", "Here."), ("user", "and again")]


# -- the writer and the lock ----------------------------------------------------------------


def test_a_second_writer_of_the_same_file_is_refused_until_the_first_closes(tmp_path):
    writer = SessionWriter.create(str(tmp_path), "/p", lazy=False)
    writer.append_message(_user("q"))
    writer.close()
    # The pid recorded is the owner's (the store records the CLI or server that started it).
    first = SessionWriter.resume(writer.path, owner_pid=os.getppid())
    with pytest.raises(SessionLocked) as refused:
        SessionWriter.resume(writer.path)
    assert refused.value.pid == os.getppid()
    assert str(refused.value).startswith(f"session {writer.session_id[:8]} is open in another pi-actors process (pid ")
    assert lock_holder(writer.path) == refused.value.pid
    first.close()
    assert lock_holder(writer.path) is None and not os.path.exists(writer.path + ".lock")
    with SessionWriter.resume(writer.path) as again:
        again.append_message(_user("after"))
    assert [e["message"]["content"] for e in load_session(writer.path).entries] == ["q", "after"]


async def test_a_lock_dies_with_its_process_and_a_stale_lock_file_is_taken_over(tmp_path):
    writer = SessionWriter.create(str(tmp_path), "/p", lazy=False)
    writer.append_message(_user("q"))
    writer.close()
    code = (
        "import sys; from pi_actors.coding.session import SessionWriter;"
        f"w = SessionWriter.resume({writer.path!r}); print('held', flush=True); sys.stdin.read()"
    )
    proc = await trio.lowlevel.open_process([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        with trio.fail_after(30):
            assert (await proc.stdout.receive_some()).startswith(b"held")
        with pytest.raises(SessionLocked) as refused:
            SessionWriter.resume(writer.path)
        assert refused.value.pid == proc.pid
    finally:
        proc.kill()
        await proc.wait()
    assert os.path.exists(writer.path + ".lock")  # left behind by the kill, but not locked
    with SessionWriter.resume(writer.path) as again:
        again.append_message(_user("after the kill"))
    assert not os.path.exists(writer.path + ".lock")


def test_a_new_session_file_is_locked_from_its_creation(tmp_path):
    writer = SessionWriter.create(str(tmp_path), "/p")  # lazy: nothing on disk yet
    writer.append_message(_user("q"))
    assert not os.path.exists(writer.path + ".lock")
    writer.append_message({"role": "assistant", "content": [], "api": "x", "provider": "p", "model": "m", "usage": {}, "stopReason": "stop", "timestamp": 2})
    assert lock_holder(writer.path) == os.getpid()
    with pytest.raises(SessionLocked):
        SessionWriter.resume(writer.path)
    writer.close()
    assert lock_holder(writer.path) is None
