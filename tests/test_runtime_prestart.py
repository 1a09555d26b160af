"""Actors started ahead of their configuration (``runtime.prestart_actor``): real processes.

A prestarted process imports its ``preload`` while its owner prepares, is booted later with
its configuration (``start_actor(prestarted=...)``, ``start_watched_actor``), and is never
left running: given up, it is killed and reaped; orphaned before its boot, it dies with its
parent."""

from __future__ import annotations

import json
import os
import select
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import trio

from pi_actors.runtime import RestartPolicy, open_peer, prestart_actor, start_actor
from pi_actors.runtime._supervise import start_watched_actor

_PROBE = '''
import sys
import threading

async def run(links, config):
    """Answer one ``report`` call with what this process knows, then end."""
    from pi_actors.runtime import open_peer

    async def handler(call):
        for thread in threading.enumerate():
            if thread.name == "preload":
                thread.join()  # the preload runs in a thread, beside the boot
        return {"config": config, "links": sorted(links),
                "preloaded": [m for m in config["expect"] if m in sys.modules]}

    async with open_peer(links["coordinator"], side="server", role="probe", name="owner", handler=handler) as peer:
        await peer.closed_event.wait()
'''


def _probe(tmp_path: Path) -> str:
    (tmp_path / "prestart_probe.py").write_text(_PROBE)
    return str(tmp_path)


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


async def test_a_prestarted_actor_runs_with_the_configuration_and_links_it_is_booted_with(tmp_path):
    early = prestart_actor(name="probe", links=("coordinator",), preload=("pi_actors.actors.provider", "colorsys"))
    ours = early.take_end("coordinator")
    config = {"expect": ["pi_actors.actors.provider", "colorsys"], "answer": 42}
    async with trio.open_nursery() as nursery:
        process = await start_actor(nursery, name="probe", entry="prestart_probe:run", links={}, config=config,
                                    import_paths=(_probe(tmp_path),), prestarted=early)  # fmt: skip
        assert process.pid == early.process.pid and early.adopted
        stream = trio.SocketStream(trio.socket.from_stdlib_socket(ours))
        with trio.fail_after(30):
            async with open_peer(stream, side="client", role="owner", name="probe") as peer:
                report = await peer.call("report", {})
            await process.exited.wait()
    assert report == {"config": config, "links": ["coordinator"], "preloaded": config["expect"]}
    early.abandon()  # adopted: nothing to do
    assert process.returncode == 0


async def test_a_watched_prestarted_actor_is_seen_to_end():
    early = prestart_actor(name="provider", links=("coordinator", "supervisor"), preload=("pi_actors.actors.provider",))
    ours = early.take_end("coordinator")
    async with trio.open_nursery() as nursery:
        actor = await start_watched_actor(nursery, name="provider", entry="pi_actors.actors.provider:run_provider",
                                          links={}, config={}, policy=RestartPolicy(), prestarted=early)  # fmt: skip
        stream = trio.SocketStream(trio.socket.from_stdlib_socket(ours))
        with trio.fail_after(30):
            async with open_peer(stream, side="client", role="coordinator", name="provider"):
                pass  # the hello answered; closing the link ends the provider
            await actor.down.wait()
    assert actor.reason == "exited with status 0"


def test_a_prestarted_actor_that_is_given_up_is_killed_and_reaped():
    early = prestart_actor(name="probe", links=("coordinator", "supervisor"), preload=("pi_actors.actors.provider",))
    pid = early.process.pid
    early.abandon()
    assert early.process.returncode is not None  # reaped by us: no zombie, no orphan
    assert _gone(pid)
    assert not early.ends
    early.abandon()  # again: nothing to do


def test_a_prestarted_actor_dies_with_its_owner_before_it_is_booted():
    # The owner (a separate process) starts an actor ahead, then dies without booting it or
    # giving it up: the actor must not stay behind, waiting for a boot document.
    script = textwrap.dedent(
        """
        import json, os, sys
        from pi_actors.runtime import prestart_actor
        early = prestart_actor(name="orphan", links=("coordinator",), preload=("pi_actors.actors.provider",))
        print(json.dumps(early.process.pid), flush=True)
        sys.stdin.readline()  # the test has its pidfd now
        os._exit(0)  # dies: no abandon, stdin of the child never closed by us
        """
    )
    owner = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert owner.stdout is not None and owner.stdin is not None
        pid = json.loads(owner.stdout.readline())
        pidfd = os.pidfd_open(pid)
        try:
            owner.stdin.write("\n")
            owner.stdin.flush()
            owner.wait(30)
            exited, _, _ = select.select([pidfd], [], [], 30)  # readable once the actor exited
            assert exited, "the actor outlived its owner"
        finally:
            os.close(pidfd)
    finally:
        if owner.poll() is None:
            owner.kill()
            owner.wait()


async def test_start_actor_refuses_links_for_a_prestarted_actor():
    early = prestart_actor(name="probe", links=("coordinator",))
    try:
        async with trio.open_nursery() as nursery:
            a, b = socket.socketpair()
            with a, b, pytest.raises(ValueError, match="brings its own links"):
                await start_actor(nursery, name="probe", entry="x:y", links={"other": b}, prestarted=early)
    finally:
        early.abandon()
    assert _gone(early.process.pid)


async def test_a_local_runtime_that_cannot_start_gives_up_the_actor_started_ahead_for_it():
    from pi_actors.actors import open_local_runtime

    early = prestart_actor(name="provider", links=("coordinator", "supervisor"), preload=("pi_actors.actors.provider",))
    with pytest.raises(ValueError):
        async with open_local_runtime({"coordinator": {"cwd": 5}}, prestarted={"provider": early}):
            pass
    assert early.process.returncode is not None  # killed and reaped, not left to its parent-death signal
