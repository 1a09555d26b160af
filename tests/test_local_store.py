"""The session store in the coordinator's process (every CLI mode) is called without a wire,
and a caller cannot tell: the same answers and refusals as a store process, and a write the
disk refuses still fails the prompt with the disk's error.

Real parts: a real ``SessionStore`` on real files, served over a real socketpair by its
router (as in a store process) and called directly (``LocalStore``); the end-to-end test runs
the real actor processes (``open_local_runtime(store_with_coordinator=True)``) and makes the
coordinator's process unable to grow the session file (``RLIMIT_FSIZE``, set on that process
only), so the append fails in the kernel with EFBIG.
"""

from __future__ import annotations

import json
import resource
import socket
from typing import Any

import pytest
import trio
from conftest import actor_config

from pi_actors.actors import LocalStore
from pi_actors.actors.session_store import SessionStore
from pi_actors.protocol.store import STORE
from pi_actors.runtime import RemoteError, Router, open_peer
from pi_actors.testing.scripted_server import Reply

_VOLATILE = {"id", "ids", "parentId", "timestamp", "path", "leafId", "cwd", "parentSession"}


def _stable(value: Any) -> Any:
    """``value`` with what differs between two stores of the same calls (random ids, times,
    paths) blanked out."""
    if isinstance(value, dict):
        return {k: "*" if k in _VOLATILE else _stable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_stable(v) for v in value]
    return value


def _calls(session_dir: str) -> list[tuple[str, Any]]:
    message = {"role": "user", "content": [{"type": "text", "text": "hi"}], "timestamp": 1}
    reply = {"role": "assistant", "content": [{"type": "text", "text": "hello"}], "stopReason": "stop", "timestamp": 2}
    return [
        ("context", None),  # nothing open yet: not_open
        ("open", {"cwd": session_dir}),  # neither sessionDir nor agentDir: invalid_request
        ("open", {"cwd": session_dir, "sessionDir": session_dir}),
        ("append", {"message": message}),
        ("append", {}),  # no message: invalid_request naming the field
        ("append", {"message": "not a dict"}),
        ("append_entry", {"entry": {"no": "type"}}),  # not an entry: invalid_args
        ("append_messages", {"messages": [reply, message]}),
        ("branch", {"entryId": "no-such-entry"}),  # not_found
        ("label", {"targetId": "no-such-entry", "label": "x"}),  # not_found
        ("entries", None),
        ("context", None),
        ("no_such_method", {}),  # not_found
        ("fork", {"entryId": None}),
        ("context", None),
    ]


async def _answers(call: Any, session_dir: str) -> list[Any]:
    out: list[Any] = []
    for method, args in _calls(session_dir):
        try:
            out.append(("ok", _stable(await call(method, args))))
        except RemoteError as exc:
            out.append((exc.code, exc.message))
    return out


async def test_the_coordinators_own_store_answers_and_refuses_as_a_store_process_does(tmp_path):
    served_dir, local_dir = tmp_path / "served", tmp_path / "local"
    served_dir.mkdir()
    local_dir.mkdir()
    a, b = socket.socketpair()
    ours, theirs = (trio.SocketStream(trio.socket.from_stdlib_socket(s)) for s in (a, b))
    served_store = SessionStore()
    async with trio.open_nursery() as nursery:

        async def serve() -> None:
            async with open_peer(
                theirs, side="server", role="session-store", name="store", handler=Router.serving(served_store, STORE)
            ) as peer:
                await peer.closed_event.wait()

        nursery.start_soon(serve)
        async with open_peer(ours, side="client", role="coordinator", name="store") as peer:
            over_the_wire = await _answers(peer.call, str(served_dir))
    served_store.close()
    local = LocalStore(SessionStore())
    try:
        direct = await _answers(local.call, str(local_dir))
    finally:
        local.close()
    codes = [answer[0] for answer in direct]
    assert codes == ["not_open", "invalid_request", "ok", "ok", "invalid_request", "invalid_request", "invalid_args", "ok",
                     "not_found", "not_found", "ok", "ok", "not_found", "ok", "ok"]  # fmt: skip
    assert direct == over_the_wire

    # Both wrote the same entries, in the same order.
    def written(folder: Any) -> list[list[Any]]:
        lines = [[json.loads(line) for line in p.read_text().splitlines()] for p in folder.glob("*.jsonl")]
        return sorted([(e["type"], e.get("message", {}).get("role")) for e in entries] for entries in lines)

    assert (
        written(local_dir)
        == written(served_dir)
        == [[("session", None), ("message", "user"), ("message", "assistant"), ("message", "user")]]
    )


async def test_an_answer_of_the_coordinators_own_store_is_a_copy_the_store_does_not_share(tmp_path):
    """The wire hands the caller fresh objects; so does the direct call: editing an answer
    changes nothing the store answers next."""
    local = LocalStore(SessionStore())
    try:
        await local.call("open", {"cwd": str(tmp_path), "sessionDir": str(tmp_path)})
        await local.call("append", {"message": {"role": "user", "content": "hi", "timestamp": 1}})
        first = await local.call("context")
        first["context"]["messages"][0]["content"] = "edited"
        first["header"]["version"] = -1
        again = await local.call("context")
        assert again["context"]["messages"][0]["content"] == "hi"
        assert again["header"]["version"] != -1
    finally:
        local.close()


async def test_a_prompt_the_coordinators_own_store_cannot_write_fails_with_the_disks_error(scripted, tmp_path):
    from pi_actors.actors import open_local_runtime

    scripted.script.extend([Reply(text="saved"), Reply(text="never asked for")])
    sessions = tmp_path / "sessions"
    config = actor_config(scripted, tmp_path, tools=(), session={"sessionDir": str(sessions), "agentDir": str(tmp_path)})
    processes: dict[str, Any] = {}
    with trio.fail_after(60):
        async with open_local_runtime(config, processes=processes, store_with_coordinator=True) as coordinator:
            assert "session-store" not in processes  # the store is in the coordinator's process
            await coordinator.call("prompt", {"text": "first"})
            [file] = sessions.glob("*.jsonl")
            before = file.read_bytes()
            # The coordinator's process may not make the file any longer: the next append
            # fails in the kernel (EFBIG; Python ignores SIGXFSZ).
            _, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
            resource.prlimit(processes["coordinator"].pid, resource.RLIMIT_FSIZE, (len(before), hard))
            with pytest.raises(RemoteError) as failed:
                await coordinator.call("prompt", {"text": "second"})
    assert failed.value.code == "write_failed"
    assert failed.value.message.startswith("session not saved: session write failed: Cannot append to session file")
    assert "File too large (EFBIG)" in failed.value.message
    assert file.read_bytes() == before  # nothing half-written
    assert len(scripted.requests) == 1  # the unsaved prompt never reached the model
