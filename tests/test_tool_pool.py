"""The tool pool with real worker processes: warm-up, growth, cancellation, crashes, ordering.

Each test runs the pool actor in-process (``open_pool``) and talks to it as the coordinator
does. Tests learn that a command runs from its streamed output (it announces itself), find
its processes in /proc, and wait for exits on pidfds; time bounds are only safety nets.
"""

from __future__ import annotations

import os
import secrets
import signal
from functools import partial

import pytest
import trio
from _procs import live_pids, wait_exited
from support.sandbox import PoolClient, open_pool, parent_of, pids_running, sandbox_config, text_of, worker_pids

from pi_actors.actors.tool_pool import ToolPool
from pi_actors.coding.sandbox import SandboxPolicy
from pi_actors.protocol.pool import POOL
from pi_actors.runtime import Router, link_pair, open_peer

MODES = ["workspace-write", "off"]


def tag() -> int:
    """A unique number to recognise this test's ``sleep`` processes by."""
    return 500000 + secrets.randbelow(400000)


def group_of(pid: int) -> list[int]:
    """Running members of ``pid``'s process group."""

    def member(other: int) -> bool:
        try:
            return os.getpgid(other) == pid
        except OSError:
            return False

    return live_pids(member)


def shell_leading(text: str) -> int:
    """The bash process whose command line contains ``text`` and which leads its own group."""
    leaders = [pid for pid in pids_running(text) if os.getpgid(pid) == pid]
    assert len(leaders) == 1, leaders
    return leaders[0]


async def open_fifo_for_writing(path) -> int:
    return await trio.to_thread.run_sync(os.open, str(path), os.O_WRONLY, abandon_on_cancel=True)


async def feed_fifo(path, data: bytes) -> None:
    fd = await open_fifo_for_writing(path)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


async def drain_fifo(path) -> bytes:
    def read_all() -> bytes:
        with open(path, "rb") as handle:
            return handle.read()

    return await trio.to_thread.run_sync(read_all, abandon_on_cancel=True)


class Started:
    """Collects 'started N' announcements from streamed bash output."""

    def __init__(self) -> None:
        self.seen: set[str] = set()
        self._changed = trio.Event()

    def on_update(self, text: str) -> None:
        for line in text.splitlines():
            if line.startswith("started"):
                self.seen.add(line)
        self._changed.set()
        self._changed = trio.Event()

    async def wait_for(self, count: int) -> None:
        with trio.fail_after(30):
            while len(self.seen) < count:
                await self._changed.wait()


# -- workers -------------------------------------------------------------------------------


async def no_workers_left() -> None:
    """Wait until no tool worker of an earlier test in this process is alive: counting
    workers (``worker_pids``) counts every worker descended from the test process, and the
    workers of a pool that has just closed may still be exiting on a busy machine (a
    sandboxed one dies with its sandbox's PID 1, asynchronously)."""
    await wait_exited(worker_pids(), timeout=30)


async def test_warm_workers_start_ahead_and_serve_the_first_calls(tmp_path):
    await no_workers_left()
    config = {**sandbox_config(str(tmp_path)), "warm": 2}
    async with open_pool(str(tmp_path), **config) as pool:
        assert worker_pids() == []  # warm-up waits for the coordinator's "warm"
        await pool.peer.call("warm")
        async with trio.open_nursery() as nursery:
            for _ in range(2):
                nursery.start_soon(pool.assert_healthy)
        # Both calls were served by the two warm workers: no third worker was started.
        assert len(worker_pids()) == 2


async def test_the_pool_grows_to_its_limit_one_call_per_worker_and_later_calls_wait(tmp_path):
    for i in range(4):
        os.mkfifo(tmp_path / f"f{i}")
    started = Started()
    results: dict[int, dict] = {}
    await no_workers_left()
    async with open_pool(str(tmp_path), **{**sandbox_config(str(tmp_path)), "max_workers": 3}) as pool:

        async def call(i: int) -> None:
            results[i] = await pool.bash(f"echo started {i}; cat f{i}", on_update=started.on_update)

        async with trio.open_nursery() as nursery:
            for i in range(4):
                nursery.start_soon(call, i)
            await started.wait_for(3)
            workers = worker_pids()
            assert len(workers) == 3
            # bash execs the last command of the list: "cat f<i>" leads each call's group.
            shells = [shell_leading(f"cat f{i}") for i in range(4) if f"started {i}" in started.seen]
            # One call per worker, each call's processes in a process group of their own.
            assert sorted(parent_of(shell) for shell in shells) == workers
            assert all(os.getpgid(shell) not in (os.getpgid(w) for w in workers) for shell in shells)
            (waiting,) = {0, 1, 2, 3} - {int(s.split()[1]) for s in started.seen}
            assert not pids_running(f"cat f{waiting}")  # no worker free for it yet
            first = sorted(int(s.split()[1]) for s in started.seen)[0]
            await feed_fifo(tmp_path / f"f{first}", b"done\n")
            await started.wait_for(4)  # the waiting call got the freed worker
            assert worker_pids() == workers
            for i in range(4):
                if i != first:
                    await feed_fifo(tmp_path / f"f{i}", b"done\n")
    assert all(text_of(results[i]).endswith("done\n") for i in range(4))


@pytest.mark.parametrize("mode", MODES)
async def test_cancel_sends_term_to_the_group_then_kill_after_the_grace_period(tmp_path, mode):
    n = tag()
    command = f"trap 'echo term >> got-term' TERM; sleep {n} & echo started; while :; do sleep 0.05; done"
    started = Started()
    async with open_pool(str(tmp_path), **sandbox_config(str(tmp_path), mode=mode)) as pool:
        args = {"toolCallId": "c", "name": "bash", "args": {"command": command}, "cwd": str(tmp_path)}
        async with pool.peer.open_call("run_tool", args) as call:
            async for partial in call:
                started.on_update(text_of(partial))
                if started.seen:
                    break
            group = group_of(shell_leading(f"sleep {n} &"))
            await call.cancel()
            result = await call.result()
        # The output so far comes back before the notice (pi keeps it too); bash may add a
        # "Terminated" line for the sleep the TERM ended.
        assert result["isError"] is True and result["details"] is None
        assert text_of(result).startswith("started\n") and text_of(result).endswith("\n\n\nCommand aborted")
        # The result came after the whole group had exited: the shell ignored TERM (it only
        # ran its trap), so it took the KILL after the grace period.
        await wait_exited(group, timeout=1)
        assert (tmp_path / "got-term").read_text().startswith("term")
        await pool.assert_healthy()


@pytest.mark.parametrize("mode", MODES)
async def test_a_timeout_kills_the_call_and_its_background_children(tmp_path, mode):
    n = tag()
    group: list[int] = []

    def on_update(text: str) -> None:
        if "started" in text and not group:
            group.extend(group_of(shell_leading(f"sleep {n} &")))

    async with open_pool(str(tmp_path), **sandbox_config(str(tmp_path), mode=mode)) as pool:
        result = await pool.bash(f"sleep {n} & echo started; sleep {n + 1}; echo never", timeout=1, on_update=on_update)
        assert result["isError"] is True
        assert text_of(result) == "started\n\n\nCommand timed out after 1 seconds"
        assert len(group) >= 2
        await wait_exited(group, timeout=1)


@pytest.mark.parametrize("mode", MODES)
async def test_a_background_child_does_not_outlive_its_call(tmp_path, mode):
    n = tag()
    seen: list[int] = []
    os.mkfifo(tmp_path / "go")

    async def on_update(text: str) -> None:
        if "started" in text and not seen:
            seen.extend(group_of(shell_leading(f"sleep {n} &")))
            await feed_fifo(tmp_path / "go", b"finish\n")  # now let the shell exit

    async with open_pool(str(tmp_path), **sandbox_config(str(tmp_path), mode=mode)) as pool:
        result = await pool.bash(f"sleep {n} & sleep {n + 1} & echo started; read line < go", on_update=on_update)
        assert result["isError"] is False and text_of(result) == "started\n"
        assert len(seen) >= 2
        # Gone by the time the result arrived (the bound only keeps a failure from hanging).
        await wait_exited(seen, timeout=0.5)


async def test_in_the_sandbox_even_a_child_that_left_the_process_group_ends_with_the_call(tmp_path):
    n = tag()
    async with open_pool(str(tmp_path), **sandbox_config(str(tmp_path))) as pool:
        result = await pool.bash(f"setsid sleep {n} & nohup setsid sleep {n + 1} >/dev/null 2>&1 & echo started")
        assert text_of(result) == "started\n"
        assert not pids_running(f"sleep {n}") and not pids_running(f"sleep {n + 1}")


@pytest.mark.parametrize("mode", MODES)
async def test_a_worker_killed_mid_call_gives_an_error_naming_the_signal_and_is_replaced(tmp_path, mode):
    n = tag()
    victim: list[int] = []

    def on_update(text: str) -> None:
        if "started" in text and not victim:
            shell = shell_leading(f"sleep {n}")
            victim.append(parent_of(shell))  # the worker running this call
            victim.extend(group_of(shell))
            os.kill(victim[0], signal.SIGKILL)

    async with open_pool(str(tmp_path), **sandbox_config(str(tmp_path), mode=mode)) as pool:
        result = await pool.bash(f"echo started; sleep {n}; echo never", on_update=on_update)
        assert result == {
            "content": [{"type": "text", "text": "Tool worker crashed while running bash: killed by signal SIGKILL"}],
            "details": None,
            "isError": True,
        }
        if mode == "off":
            # Unsandboxed, the call's shell dies with the worker, but what the shell started
            # is orphaned: nothing outside the worker knows its process group. Clean up.
            await wait_exited(victim[:2], timeout=5)
            for pid in pids_running(f"sleep {n}"):
                os.kill(pid, signal.SIGKILL)
        else:
            await wait_exited(victim, timeout=5)  # the sandbox went down with its worker
        await pool.assert_healthy()
        assert victim[0] not in worker_pids()


# -- ordering ------------------------------------------------------------------------------


async def test_bash_calls_run_concurrently(tmp_path):
    os.mkfifo(tmp_path / "pipe")
    async with open_pool(str(tmp_path), **sandbox_config(str(tmp_path))) as pool:
        results: dict[str, dict] = {}

        async def run(key: str, command: str) -> None:
            results[key] = await pool.bash(command)

        async with trio.open_nursery() as nursery:
            # Each blocks until the other has opened the fifo: only overlap completes both.
            nursery.start_soon(run, "reader", "cat pipe")
            nursery.start_soon(run, "writer", "echo through > pipe; echo sent")
    assert text_of(results["reader"]) == "through\n" and text_of(results["writer"]) == "sent\n"


async def test_a_caller_that_reads_no_partial_results_gets_none_and_the_whole_result(tmp_path):
    """``-p`` reads no partial result: the pool streams none (``updates: false``), and the
    result is the same; a caller that reads them (a UI) still gets them."""
    async with open_pool(str(tmp_path), **sandbox_config(str(tmp_path))) as pool:
        for updates in (True, False):
            partials: list[str] = []
            result = await pool.bash("echo one; echo two >&2", on_update=partials.append, updates=updates)
            assert result["isError"] is False and text_of(result) == "one\ntwo\n", result
            if updates:
                assert partials and partials[-1] == "one\ntwo\n"
            else:
                assert partials == []


# -- no silent fallback --------------------------------------------------------------------


async def test_a_sandbox_that_cannot_be_set_up_fails_the_call_with_the_reason(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "no-such-bin"))  # no bwrap to be found
    async with open_pool(str(tmp_path), **sandbox_config(str(tmp_path))) as pool:
        result = await pool.bash("touch ran")
    assert result["isError"] is True
    text = text_of(result)
    assert text.startswith("Tool bash was not run: the sandbox could not be set up:")
    assert "'bwrap' is not installed" in text and "--sandbox off" in text
    assert not (tmp_path / "ran").exists() and worker_pids() == []


async def test_running_without_a_sandbox_is_announced(tmp_path, capfd):
    async with open_pool(str(tmp_path), **sandbox_config(str(tmp_path), mode="off")) as pool:
        await pool.assert_healthy()
    assert "tools run without a sandbox (--sandbox off)" in capfd.readouterr().err


async def test_a_call_cancelled_while_waiting_for_its_turn_ends_at_once_and_never_runs(tmp_path):
    os.mkfifo(tmp_path / "shared")
    async with open_pool(str(tmp_path), **sandbox_config(str(tmp_path))) as pool:

        async def first(task_status=trio.TASK_STATUS_IGNORED) -> None:
            args = {"toolCallId": "1", "name": "write", "args": {"path": "shared", "content": "first"}, "cwd": str(tmp_path)}
            async with pool.peer.open_call("run_tool", args) as out:
                task_status.started()
                assert (await out.result())["isError"] is False

        async with trio.open_nursery() as nursery:
            await nursery.start(first)  # blocks in the fifo until we read
            args = {"toolCallId": "2", "name": "write", "args": {"path": "shared", "content": "second"}, "cwd": str(tmp_path)}
            async with pool.peer.open_call("run_tool", args) as second:
                await second.cancel()
                result = await second.result()
            assert result == {"content": [{"type": "text", "text": "Operation aborted"}], "details": None, "isError": True}
            assert await drain_fifo(tmp_path / "shared") == b"first"


async def test_a_call_in_a_missing_working_directory_is_refused_clearly(tmp_path):
    async with open_pool(str(tmp_path), **sandbox_config(str(tmp_path))) as pool:
        result = await pool.bash("echo hi", cwd=str(tmp_path / "gone"))
        assert result["isError"] is True
        assert text_of(result) == f"Tool bash was not run: the working directory {tmp_path / 'gone'} does not exist"
        await pool.assert_healthy()


async def test_a_killed_pools_private_tmp_is_removed_by_the_next_pool(tmp_path):
    import subprocess
    import tempfile

    gone = subprocess.Popen(["true"])  # noqa: ASYNC220  # a pid that exits at once
    gone.wait()  # a pid that no longer runs: the "killed pool"
    stale = tempfile.mkdtemp(prefix=f"pi-actors-tmp-{gone.pid}-")
    alive = tempfile.mkdtemp(prefix=f"pi-actors-tmp-{os.getppid()}-")  # its owner still runs
    try:
        async with open_pool(str(tmp_path), **sandbox_config(str(tmp_path))) as pool:
            await pool.assert_healthy()
        assert not os.path.exists(stale) and os.path.exists(alive)
    finally:
        os.rmdir(alive)


async def test_workers_for_a_streaming_replys_calls_are_forked_before_the_calls_arrive_and_serve_them(tmp_path):
    """``expect_calls {calls: N}`` (the coordinator's count of a reply's tool calls as they stream)
    forks workers until N are idle or starting, within the pool's limit; the calls then run on
    those workers, none is started for them, and every one of them ends with the pool."""
    await no_workers_left()
    workspace = str(tmp_path)
    policy = SandboxPolicy.from_config(sandbox_config(workspace)["sandbox"])
    ours, theirs = link_pair()
    async with trio.open_nursery() as nursery:
        pool = ToolPool(nursery, max_workers=4, warm=0, policy=policy)
        served = trio.SocketStream(trio.socket.from_stdlib_socket(theirs))
        nursery.start_soon(partial(serve_peer, served, Router.serving(pool, POOL)))
        stream = trio.SocketStream(trio.socket.from_stdlib_socket(ours))
        async with open_peer(stream, side="client", role="coordinator", name="tool-pool") as peer:
            client = PoolClient(peer, workspace)
            await peer.call("expect_calls", {"calls": 1, "cwd": workspace})
            await peer.call("expect_calls", {"calls": 3, "cwd": workspace})  # the first is still starting
            with trio.fail_after(60):
                await pool.wait_idle(3)
            assert pool.started == 3 and len(worker_pids()) == 3
            await peer.call("expect_calls", {"calls": 3, "cwd": workspace})  # already there: nothing more
            await peer.call("expect_calls", {"calls": 9})  # up to the pool's limit (4); cwd: its workspace
            with trio.fail_after(60):
                await pool.wait_idle(4)
            workers = worker_pids()
            assert pool.started == 4 and len(workers) == 4
            async with trio.open_nursery() as calls:
                for _ in range(4):
                    calls.start_soon(client.assert_healthy)
            assert pool.started == 4 and worker_pids() == workers  # served by the forked ones
        nursery.cancel_scope.cancel()
    await wait_exited(workers, timeout=30)


async def serve_peer(stream: trio.SocketStream, handler) -> None:
    async with open_peer(stream, side="server", role="tool-pool", name="coordinator", handler=handler) as peer:
        await peer.closed_event.wait()
