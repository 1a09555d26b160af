"""Escape attempts under the workspace-write sandbox: each fails, and the pool stays healthy.

The pool runs in-process with real bubblewrap workers. The jail lives under /var/tmp (so
that "outside the workspace" is ordinary read-only file system, not the sandbox's private
/tmp); it holds the workspace, a directory outside it, a fake home with an ~/.ssh key and an
agent directory with session files. The test process carries fake provider keys in its
environment, which the pool must not hand on.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import uuid
from functools import partial
from pathlib import Path

import pytest
import trio
from support.sandbox import free_listener, open_pool, sandbox_config, text_of, worker_pids

SECRET = "sk-ant-test-SECRET-" + uuid.uuid4().hex
PROCESS_LIMIT = 64
FILE_LIMIT = 1024 * 1024


class Jail:
    def __init__(self, base: Path) -> None:
        self.base = base
        self.ws = base / "ws"
        self.outside = base / "outside"
        self.home = base / "home"
        self.agent = base / "agent"
        for d in (self.ws, self.outside, self.home / ".ssh", self.agent / "sessions"):
            d.mkdir(parents=True)
        (self.outside / "target.txt").write_text("untouched")
        (self.home / ".ssh" / "id_rsa").write_text("PRIVATE KEY " + SECRET)
        (self.agent / "sessions" / "s.jsonl").write_text('{"secret": "SESSION ' + SECRET + '"}\n')
        (self.agent / "models.json").write_text('{"apiKey": "' + SECRET + '"}')

    def config(self, **policy) -> dict:
        limits = {"processes": PROCESS_LIMIT, "fileSize": FILE_LIMIT, "memory": 512 * 1024 * 1024}
        return sandbox_config(str(self.ws), home=str(self.home), hidden=[str(self.agent)], limits=limits, **policy)

    def outside_untouched(self) -> bool:
        return sorted(p.name for p in self.outside.iterdir()) == ["target.txt"] and (
            self.outside / "target.txt"
        ).read_text() == "untouched"


@pytest.fixture
def jail(monkeypatch):
    base = Path(tempfile.mkdtemp(prefix="pi-actors-jail-", dir="/var/tmp"))
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.setenv("MY_SERVICE_TOKEN", SECRET)
    monkeypatch.setenv("PI_ACTORS_DIR", str(base / "agent"))
    try:
        yield Jail(base)
    finally:
        shutil.rmtree(base, ignore_errors=True)


async def test_writing_outside_the_workspace_fails_by_absolute_path_dotdot_and_planted_symlinks(jail):
    os.symlink(jail.outside / "target.txt", jail.ws / "link")
    os.symlink(jail.outside, jail.ws / "dirlink")
    async with open_pool(str(jail.ws), **jail.config()) as pool:
        for path in (str(jail.outside / "target.txt"), "../outside/target.txt", "link", "dirlink/new.txt"):
            result = await pool.run("write", {"path": path, "content": "pwned"})
            assert result["isError"] is True and "EROFS: read-only file system" in text_of(result), (path, result)
        result = await pool.run("edit", {"path": "link", "oldText": "untouched", "newText": "pwned"})
        assert result["isError"] is True and "EROFS" in text_of(result)
        result = await pool.bash(
            f"echo pwned > {jail.outside}/target.txt; echo pwned > ../outside/new; echo pwned > link; "
            f"ln -s {jail.outside}/target.txt planted && echo pwned > planted; touch dirlink/x; "
            "echo pwned > /etc/pwned; echo done"
        )
        assert text_of(result).count("Read-only file system") == 6 and text_of(result).endswith("done\n")
        assert jail.outside_untouched() and not Path("/etc/pwned").exists()
        # Inside the workspace, writing works.
        assert (await pool.run("write", {"path": "sub/ok.txt", "content": "fine"}))["isError"] is False
        assert (jail.ws / "sub" / "ok.txt").read_text() == "fine"
        await pool.assert_healthy()


async def test_the_sandbox_has_its_own_tmp(jail):
    name = f"pi-actors-escape-{uuid.uuid4().hex}"
    host_file = Path("/tmp") / (name + "-host")
    host_file.write_text("host only")
    try:
        async with open_pool(str(jail.ws), **jail.config()) as pool:
            result = await pool.bash(f"echo inside > /tmp/{name}; cat /tmp/{name}; cat {host_file} || echo not-visible")
            output, _, notice = text_of(result).partition("\n[Sandbox: /tmp and /dev/shm are private")
            assert output.startswith("inside\n") and output.endswith("not-visible\n") and notice
            assert not (Path("/tmp") / name).exists()
            await pool.assert_healthy()
    finally:
        host_file.unlink()


async def test_ssh_keys_and_the_session_directory_cannot_be_read(jail):
    key = jail.home / ".ssh" / "id_rsa"
    session = jail.agent / "sessions" / "s.jsonl"
    async with open_pool(str(jail.ws), **jail.config()) as pool:
        for path in (key, session, jail.agent / "models.json"):
            result = await pool.run("read", {"path": str(path)})
            assert result["isError"] is True and "ENOENT" in text_of(result)
        listing = await pool.run("ls", {"path": str(jail.agent)})
        assert text_of(listing) == "(empty directory)"
        found = await pool.run("grep", {"pattern": "SECRET", "path": str(jail.base)})
        assert SECRET not in text_of(found)
        result = await pool.bash(f"cat {key} {session}; ls -A {jail.home}/.ssh {jail.agent}; grep -r SECRET {jail.base}; echo done")
        assert SECRET not in text_of(result) and text_of(result).endswith("done\n")
        await pool.assert_healthy()


async def test_no_connection_reaches_a_host_service_on_127_0_0_1(jail):
    listener = free_listener()
    port = listener.getsockname()[1]
    probe = f"""{sys.executable} -c '
import socket
try:
    socket.create_connection(("127.0.0.1", {port}), timeout=5)
    print("connected")
except OSError as e:
    print("failed:", e)
'; (echo hi > /dev/tcp/127.0.0.1/{port}) 2>&1 | tail -1"""
    try:
        async with open_pool(str(jail.ws), **jail.config()) as pool:
            result = await pool.bash(probe)
            assert "failed: [Errno 111] Connection refused" in text_of(result), result
            assert "connected" not in text_of(result)
            with pytest.raises(BlockingIOError):
                listener.accept()  # nobody ever knocked
            await pool.assert_healthy()
    finally:
        listener.close()


async def test_allow_network_lets_tools_reach_the_host(jail):
    listener = free_listener()
    port = listener.getsockname()[1]
    try:
        async with open_pool(str(jail.ws), **jail.config(allowNetwork=True)) as pool:
            result = await pool.bash(f"(echo hi > /dev/tcp/127.0.0.1/{port}) && echo connected")
            assert text_of(result) == "connected\n"
            connection, _ = listener.accept()
            connection.close()
    finally:
        listener.close()


async def test_killing_the_parent_fails_and_the_worker_carries_on(jail):
    async with open_pool(str(jail.ws), **jail.config()) as pool:
        await pool.assert_healthy()
        before = worker_pids()
        result = await pool.bash(
            f"kill -9 $PPID; kill -9 1; kill -TERM 1; kill -STOP 1; kill -9 {os.getpid()} 2>&1; "
            f"kill -9 -1; echo still-running"
        )
        assert result["isError"] is False and text_of(result).endswith("still-running\n")
        await pool.assert_healthy()
        assert worker_pids() == before  # the same worker, never replaced


async def test_a_fork_bomb_is_bounded_by_the_process_limit(jail):
    counting_bomb = f"""{sys.executable} -c '
import os, signal
n = 0
try:
    while True:
        if os.fork() == 0:
            signal.pause()  # hold the process slot until the call ends and kills it
            os._exit(0)
        n += 1
except OSError as e:
    print("forked", n, "then", e.strerror)
'"""
    async with open_pool(str(jail.ws), **jail.config()) as pool:
        result = await pool.bash(counting_bomb)
        words = text_of(result).split()
        assert words[0] == "forked" and 0 < int(words[1]) < PROCESS_LIMIT, result
        assert "Resource temporarily unavailable" in text_of(result)
        # The classic one: it ends with the call, whatever it managed to start.
        await pool.bash(":(){ :|:& };:", timeout=5)
        counted = await pool.bash("ls /proc | grep -c '^[0-9]'")
        assert int(text_of(counted)) <= 4  # the worker, this shell, ls, grep
        await pool.assert_healthy()


async def test_filling_the_disk_past_the_file_size_limit_fails(jail):
    async with open_pool(str(jail.ws), **jail.config()) as pool:
        result = await pool.bash(f"head -c {2 * FILE_LIMIT} /dev/zero > big; echo status $?; yes > big2; echo status $?")
        text = text_of(result)
        assert text.count("File size limit exceeded") == 2 and "status 153" in text, text  # 128 + SIGXFSZ
        assert (jail.ws / "big").stat().st_size == FILE_LIMIT
        written = await pool.run("write", {"path": "huge.txt", "content": "x" * (2 * FILE_LIMIT)})
        assert written["isError"] is True and text_of(written).startswith("EFBIG: file too large")
        assert not (jail.ws / "huge.txt").exists()
        await pool.assert_healthy()


async def test_the_provider_key_is_neither_in_the_environment_nor_in_any_visible_proc_environ(jail):
    async with open_pool(str(jail.ws), **jail.config()) as pool:
        result = await pool.bash(
            'echo "[$ANTHROPIC_API_KEY][$OPENAI_API_KEY][$MY_SERVICE_TOKEN]"; '
            f"cat /proc/1/environ /proc/$PPID/environ /proc/self/environ {os.getpid()} 2>&1 | tr '\\0' '\\n'; "
            f"cat /proc/{os.getpid()}/environ 2>&1; env"
        )
        text = text_of(result)
        assert text.startswith("[][][]\n") and SECRET not in text
        assert "PATH=" in text  # the allow-listed basics are there
        environ = await pool.run("read", {"path": "/proc/1/environ"})
        assert SECRET not in text_of(environ)
        await pool.assert_healthy()


async def test_the_memory_limit_stops_a_runaway_allocation(jail):
    async with open_pool(str(jail.ws), **jail.config()) as pool:
        result = await pool.bash(f"{sys.executable} -c 'bytearray(1024 ** 3)' 2>&1 | tail -1")
        assert text_of(result) == (
            "MemoryError\n\n[Sandbox limit: a process may use at most 512 MiB of memory (settings.json sandbox.memory).]"
        )
        await pool.assert_healthy()


async def test_read_only_policy_allows_no_writes_in_the_workspace_but_a_private_tmp(jail):
    async with open_pool(str(jail.ws), **jail.config(mode="read-only")) as pool:
        result = await pool.run("write", {"path": "new.txt", "content": "x"})
        assert result["isError"] is True and "EROFS" in text_of(result)
        result = await pool.bash("touch new.txt; echo scratch > /tmp/s; cat /tmp/s")
        assert "Read-only file system" in text_of(result) and "scratch\n\n[Sandbox: /tmp and /dev/shm are private" in text_of(result)
        assert list(jail.ws.iterdir()) == []


async def test_the_private_tmp_is_shared_by_the_pools_workers_so_a_spilled_output_can_be_read(jail):
    os.mkfifo(jail.ws / "hold")
    async with open_pool(str(jail.ws), **jail.config()) as pool:
        result = await pool.bash("seq 1 30000")
        assert "Full output: /tmp/pi-bash-" in text_of(result)
        written = trio.Event()

        def on_update(text: str) -> None:
            if "written" in text:
                written.set()

        async with trio.open_nursery() as nursery:
            # One worker writes to /tmp and stays busy; another one must serve the read.
            nursery.start_soon(partial(pool.bash, "echo shared > /tmp/note; echo written; cat hold", on_update=on_update))
            await written.wait()
            note = await pool.run("read", {"path": "/tmp/note"})
            assert text_of(note) == "shared\n"
            assert len(worker_pids()) == 2
            fd = await trio.to_thread.run_sync(os.open, str(jail.ws / "hold"), os.O_WRONLY)
            os.close(fd)
