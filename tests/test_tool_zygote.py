"""Tool workers forked by a zygote: one sandbox per workspace, one namespace per worker, and
nothing left running when the pool ends — however it ends.

The pool runs in-process (``open_pool``) or as its own actor process; every process it starts
inherits a marker in its environment (``PI_ACTORS_*`` passes the sandbox's allow-list), so
the tests find all of them — also a ``bwrap`` that no longer has the pool as its parent.
"""

from __future__ import annotations

import os
import signal
import uuid

import pytest
import trio
from _procs import cmdline, describe, environ_has, live_pids, parent_pid, wait_all_gone
from support.sandbox import open_pool, sandbox_config, text_of, worker_pids, zygote_pids

from pi_actors.runtime import link_pair, open_peer, start_actor
from pi_actors.testing.scripted_server import Reply
from pi_actors.testing.wire_formats import ScriptToolCall

POOL_ENTRY = "pi_actors.actors.tool_pool:run_tool_pool"


@pytest.fixture
def marker(monkeypatch) -> str:
    value = uuid.uuid4().hex
    monkeypatch.setenv("PI_ACTORS_TEST_MARKER", value)
    return value


def marked(marker: str) -> list[int]:
    """Live processes carrying the marker (never this test process itself)."""
    return live_pids(lambda pid: environ_has(pid, f"PI_ACTORS_TEST_MARKER={marker}"))


def status_field(pid: int, name: str) -> str:
    with open(f"/proc/{pid}/status") as handle:
        for line in handle:
            if line.startswith(name + ":"):
                return line.split(":", 1)[1].strip()
    raise KeyError(name)


def is_bwrap(pid: int) -> bool:
    return cmdline(pid).split(" ", 1)[0].endswith("bwrap")


async def test_one_sandbox_per_workspace_forks_every_worker_into_namespaces_of_its_own(tmp_path, marker):
    os.mkfifo(tmp_path / "hold")
    # The test holds the FIFO's only write end from the start (O_RDWR never blocks), so each
    # call's shell opens it for reading at once, *before* it announces itself; closing this
    # end then gives every reader its end of file. (With the write end opened only after the
    # announcements, a shell slower to reach its ``open`` than the test to write and close
    # blocked in it for good: the test hung in CI.)
    hold = os.open(tmp_path / "hold", os.O_RDWR)
    announced: set[str] = set()
    changed = trio.Event()

    def on_update(text: str) -> None:
        nonlocal changed
        announced.update(line for line in text.splitlines() if line.startswith("in "))
        changed.set()
        changed = trio.Event()

    try:
        async with open_pool(str(tmp_path), **sandbox_config(str(tmp_path))) as pool:
            results: list[dict] = []

            async def call(i: int) -> None:
                results.append(await pool.bash(f"exec 3<hold; echo in $PPID {i}; cat <&3", on_update=on_update))

            async with trio.open_nursery() as nursery:
                for i in range(3):
                    nursery.start_soon(call, i)
                with trio.fail_after(30):
                    while len(announced) < 3:
                        await changed.wait()
                workers = worker_pids()
                (zygote,) = zygote_pids()
                assert len(workers) == 3 and all(parent_pid(w) == zygote for w in workers)
                assert len([pid for pid in marked(marker) if is_bwrap(pid)]) == 1  # one sandbox
                assert status_field(zygote, "NSpid").split()[-1] == "1"  # the sandbox's init
                namespaces = {os.readlink(f"/proc/{w}/ns/pid") for w in workers}
                assert len(namespaces) == 3 and os.readlink(f"/proc/{zygote}/ns/pid") not in namespaces
                for w in workers:
                    assert status_field(w, "NSpid").split()[-1] == "1"  # each the init of its own
                    for caps in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
                        assert int(status_field(w, caps), 16) == 0, (caps, status_field(w, caps))
                    assert status_field(w, "NoNewPrivs") == "1"
                # Each call's shell is a child of PID 1: its own worker.
                assert {line.split()[1] for line in announced} == {"1"}
                os.close(hold)  # let all three finish
                hold = -1
                nursery.cancel_scope.deadline = trio.current_time() + 30  # a call that does not end fails the test
    finally:
        if hold >= 0:
            os.close(hold)
    assert sorted(text_of(r).split()[2] for r in results) == ["0", "1", "2"]
    assert marked(marker) == []


async def test_a_call_sees_only_its_own_processes_in_proc(tmp_path):
    async with open_pool(str(tmp_path), **sandbox_config(str(tmp_path))) as pool:
        result = await pool.bash("ls /proc | grep -c '^[0-9]'; cat /proc/1/comm; (echo x > /proc/sys/kernel/hostname) 2>&1")
        lines = text_of(result).splitlines()
        assert int(lines[0]) <= 4  # the worker, this shell, ls, grep
        assert lines[1].startswith("tool-worker-")
        assert "Read-only file system" in lines[2]  # /proc/sys stays covered, as bwrap does


@pytest.mark.parametrize("mode", ["workspace-write", "off"])
async def test_a_killed_zygote_fails_the_running_call_and_the_next_call_gets_a_new_one(tmp_path, mode):
    seen: list[int] = []

    def on_update(text: str) -> None:
        if "started" in text and not seen:
            (zygote,) = zygote_pids()
            seen.append(zygote)
            os.kill(zygote, signal.SIGKILL)

    async with open_pool(str(tmp_path), **sandbox_config(str(tmp_path), mode=mode)) as pool:
        result = await pool.bash("echo started; sleep 600", on_update=on_update)
        assert result["isError"] is True
        assert text_of(result).startswith("Tool worker crashed while running bash:"), result
        await pool.assert_healthy()
        assert zygote_pids() != seen and len(zygote_pids()) == 1
        if mode == "off":
            for pid in live_pids(lambda p: "sleep 600" in cmdline(p)):
                os.kill(pid, signal.SIGKILL)  # unsandboxed, nothing kills what the call started


@pytest.mark.parametrize("mode", ["workspace-write", "off"])
async def test_nothing_the_pool_started_outlives_it(tmp_path, marker, mode):
    async with open_pool(str(tmp_path), **{**sandbox_config(str(tmp_path), mode=mode), "warm": 2}) as pool:
        await pool.peer.call("warm")
        await pool.assert_healthy()
        assert len(worker_pids()) >= 1 and len(zygote_pids()) == 1
    # The pool waited for every process it started: gone the moment it returned.
    assert marked(marker) == [], [cmdline(pid) for pid in marked(marker)]


@pytest.mark.parametrize("round_", range(4))
async def test_a_pool_closed_while_its_sandbox_starts_leaves_nothing(tmp_path, marker, round_):
    async with open_pool(str(tmp_path), **{**sandbox_config(str(tmp_path)), "warm": 2}) as pool:
        await pool.peer.call("warm")
        for _ in range(round_ * 3):  # close at different points of the start-up
            await trio.lowlevel.checkpoint()
    assert marked(marker) == [], [cmdline(pid) for pid in marked(marker)]


@pytest.mark.parametrize("round_", [0, 1, 2, 3])
async def test_a_pool_killed_while_its_sandbox_starts_leaves_nothing(tmp_path, marker, round_):
    """The old leak: a ``bwrap`` killed with its parent mid-set-up stranded its namespace child."""
    config = {**sandbox_config(str(tmp_path)), "warm": 4}
    ours, theirs = link_pair()
    async with trio.open_nursery() as nursery:
        process = await start_actor(nursery, name="tool-pool", entry=POOL_ENTRY, links={"coordinator": theirs}, config=config)
        stream = trio.SocketStream(trio.socket.from_stdlib_socket(ours))
        async with open_peer(stream, side="client", role="coordinator", name="tool-pool") as peer:
            await peer.call("warm")
            if round_:  # kill it once the sandbox's processes are starting, at different points
                with trio.fail_after(30):
                    while len(marked(marker)) < 1 + round_:  # noqa: ASYNC110  # sandbox processes mark files; no event
                        await trio.sleep(0.001)
            process.kill()
            await process.exited.wait()
    # Nobody owns them now: the sandbox (or the start-up probe of bubblewrap, round 0) must
    # finish starting, see its pool gone and exit. A probe ``bwrap`` orphaned mid-start may
    # fork its namespace child after any one look, so this waits until a look finds nothing.
    # The bound is generous on purpose: making a network namespace waits in the kernel for
    # the ones being torn down (seen: ``synchronize_rcu_expedited``, the rtnl lock), which
    # with the whole suite's sandboxes coming and going took more than 20 s in two full runs
    # — slow, not stuck; a process stuck for good would still be here after two minutes.
    left = await wait_all_gone(lambda: marked(marker), timeout=120)
    assert left == [], "\n".join(describe(pid) for pid in left)


async def test_a_print_mode_run_with_a_tool_call_leaves_no_process_behind(scripted, env):
    for i in range(3):
        scripted.script += [
            Reply(tool_calls=[ScriptToolCall(name="bash", arguments={"command": f"echo run {i}"})]),
            Reply(text=f"done {i}"),
        ]
        done = await env.run("--model", "scripted/scripted-model", "--no-session", "-p", "go")
        assert done.returncode == 0, done.stderr.decode()
        assert done.stdout.decode() == f"done {i}\n"
        left = live_pids(lambda pid: environ_has(pid, f"PI_ACTORS_TEST_MARKER={env.marker}"))
        assert left == [], [cmdline(pid) for pid in left]


async def _zygote_process(nursery, *, sandboxed: bool, idle: bool = False):
    """A zygote started by hand (no bwrap), and the pool-side handle on it."""
    import json
    import socket
    import subprocess
    import sys

    from pi_actors.actors._zygote import Zygote

    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    process = await trio.lowlevel.open_process(
        [sys.executable, "-m", "pi_actors.actors._zygote", "tool-zygote-test"], stdin=subprocess.PIPE, pass_fds=(theirs.fileno(),)
    )
    boot = {"control": theirs.fileno(), "sandboxed": sandboxed, "parent_pid": os.getpid(), "idle": idle}
    await process.stdin.send_all(json.dumps(boot).encode())
    await process.stdin.aclose()
    theirs.close()
    zygote = Zygote("tool-zygote-test", ours)
    nursery.start_soon(zygote.serve)
    return process, zygote


async def test_a_zygote_told_it_is_sandboxed_outside_a_sandbox_starts_no_worker():
    async with trio.open_nursery() as nursery:
        process, zygote = await _zygote_process(nursery, sandboxed=True)
        with trio.fail_after(30):
            await zygote.ready.wait()
        mine, its = link_pair()
        with pytest.raises(OSError, match="not the init of a sandbox"):
            await zygote.spawn("tool-worker-0", its, {"sandboxed": True})
        mine.close()
        zygote._sock.close()  # hang up: it exits
        with trio.fail_after(30):
            assert await process.wait() == 0


async def test_an_idle_zygote_that_is_needed_goes_on_at_once_and_serves():
    async with trio.open_nursery() as nursery:
        process, zygote = await _zygote_process(nursery, sandboxed=False, idle=True)
        needed = trio.Event()
        nursery.start_soon(zygote.hurry_when, needed)
        needed.set()
        with trio.fail_after(30):
            await zygote.ready.wait()
        mine, its = link_pair()
        worker = await zygote.spawn("tool-worker-0", its, {"sandboxed": False})
        stream = trio.SocketStream(trio.socket.from_stdlib_socket(mine))
        async with open_peer(stream, side="client", role="tool-pool", name="w") as peer:
            result = await peer.call("run", {"name": "bash", "args": {"command": "echo forked"}, "cwd": os.getcwd(), "toolCallId": "x"})
            assert text_of(result) == "forked\n"
        with trio.fail_after(30):
            await worker.exited.wait()  # it left at end-of-stream, and the zygote said so
        assert worker.returncode == 0
        zygote._sock.close()
        with trio.fail_after(30):
            assert await process.wait() == 0


@pytest.mark.parametrize("mode", ["workspace-write", "off"])
async def test_a_command_starts_with_no_signal_blocked_or_ignored(tmp_path, mode):
    """Actors ignore SIGINT (Ctrl-C is the root's) and trio handles others; none of that may
    reach a user's command: ``trap`` / Ctrl-C-driven tools would behave unlike in a shell."""
    async with open_pool(str(tmp_path), **sandbox_config(str(tmp_path), mode=mode)) as pool:
        result = await pool.bash("grep -E '^Sig(Blk|Ign):' /proc/self/status")
    fields = dict(line.split(":\t") for line in text_of(result).splitlines())
    assert int(fields["SigBlk"], 16) == 0 and int(fields["SigIgn"], 16) == 0, fields


_SUBREAPER_SCRIPT = """
import ctypes, json, os, sys
import trio
sys.path[:0] = [sys.argv[2]]
from support.sandbox import open_pool, sandbox_config, zygote_pids

libc = ctypes.CDLL(None, use_errno=True)
assert libc.prctl(36, 1, 0, 0, 0) == 0  # PR_SET_CHILD_SUBREAPER: orphans of our tree come to us

async def main():
    workspace = sys.argv[1]
    for _ in range(3):
        async with open_pool(workspace, **{**sandbox_config(workspace), "warm": 1}) as pool:
            await pool.peer.call("warm")
            with trio.fail_after(30):
                while not zygote_pids():  # the sandbox's init exists, still importing
                    await trio.sleep(0.001)
    orphans = []
    while True:
        try:
            info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG)
        except ChildProcessError:
            break
        if info is None:
            break
        orphans.append(info.si_pid)
    print(json.dumps(orphans))

trio.run(main)
"""


async def test_a_pool_closed_before_its_sandbox_is_ready_leaves_no_process_to_be_reparented(tmp_path):
    # The pool kills a sandbox that is not ready yet with its whole bwrap tree. bwrap must
    # reap its dead child itself: killed first, it handed it to init (or to the subreaper
    # above us: the benchmark runner counted such re-parented processes).
    import json
    import sys
    from pathlib import Path

    tests = str(Path(__file__).resolve().parent)
    done = await trio.run_process(
        [sys.executable, "-c", _SUBREAPER_SCRIPT, str(tmp_path), tests], capture_stdout=True, capture_stderr=True, check=False
    )
    assert done.returncode == 0, done.stderr.decode()
    assert json.loads(done.stdout.decode().strip().splitlines()[-1]) == []


async def test_the_sandbox_launcher_is_out_of_reach_of_ctrl_c_and_a_terminal_hang_up(tmp_path):
    """Ctrl-C and a closing terminal signal the terminal's foreground process group. A
    ``bwrap`` that got such a signal mid-set-up died before releasing its namespace child,
    which then waited for ever (re-parented to init). The launcher is in a session and
    process group of its own, so those signals never reach it."""
    async with open_pool(str(tmp_path), **{**sandbox_config(str(tmp_path)), "warm": 1}) as pool:
        await pool.peer.call("warm")
        await pool.assert_healthy()
        me = os.getpid()
        launchers = [pid for pid in live_pids(is_bwrap) if parent_pid(pid) == me]
        assert len(launchers) == 1, [describe(pid) for pid in live_pids(is_bwrap)]
        (launcher,) = launchers
        assert os.getsid(launcher) == launcher and os.getpgid(launcher) == launcher
        assert os.getpgid(launcher) != os.getpgid(0) and os.getsid(launcher) != os.getsid(0)


async def test_the_zygotes_warm_up_call_leaves_no_descriptor_or_process_for_its_workers_to_inherit():
    """The zygote runs one real ``bash`` call through a worker's code path before it forks
    anything (so that the workers' first calls run warmed code); nothing of it may remain."""
    from pi_actors.actors._zygote import _exercise_a_call
    from pi_actors.coding.tools import process

    before = set(os.listdir("/proc/self/fd"))
    await trio.to_thread.run_sync(trio.run, _exercise_a_call)
    assert set(os.listdir("/proc/self/fd")) == before
    assert process.live_process_groups() == frozenset()  # its command was reaped
