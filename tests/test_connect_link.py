"""Issue 19 (3): the "connect" link kind of the actor boot document. An actor given
``{"connect": "HOST:PORT", "link": ID, "secret": S}`` instead of an inherited fd dials the
listener, authenticates with the per-link secret and then speaks our protocol over the
connection; a wrong secret (or a replayed, unknown link) is refused and logged, and the
listener goes on serving."""

from __future__ import annotations

import json
import logging

import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pi_actors.protocol.store import APPEND, OPEN, AppendArgs, OpenArgs
from pi_actors.runtime import LinkRefused, call_method, dial_link, open_link_listener, open_peer, start_actor

STORE = "pi_actors.actors.session_store:run_session_store"


async def test_an_actor_dials_its_connect_link_and_an_acknowledged_append_is_on_disk(tmp_path, nursery):
    with trio.fail_after(60):
        async with open_link_listener() as listener:
            offer = listener.offer("store")
            process = await start_actor(nursery, name="session-store", entry=STORE, links={"coordinator": offer.spec}, config={})
            stream = await offer.accept()
            async with open_peer(stream, side="client", role="coordinator", name="store") as store:
                info = await call_method(store, OPEN, OpenArgs(cwd=str(tmp_path), session_dir=str(tmp_path)))
                await call_method(store, APPEND, AppendArgs(message={"role": "assistant", "content": [{"type": "text", "text": "kept"}],
                                                                      "timestamp": 1}))  # fmt: skip
                path = info.path
            assert path is not None
            lines = [json.loads(line) for line in open(path, encoding="utf-8")]
            assert lines[-1]["message"]["content"][0]["text"] == "kept"
            await process.exited.wait()
            assert process.returncode == 0
            assert listener.refused == []


async def test_an_actor_with_a_wrong_secret_is_refused_logged_and_exits_with_the_reason(nursery, caplog, capfd):
    caplog.set_level(logging.WARNING, logger="pi_actors.links")
    with trio.fail_after(60):
        async with open_link_listener() as listener:
            offer = listener.offer("store")
            forged = {**offer.spec, "secret": "0" * 64}
            process = await start_actor(nursery, name="session-store", entry=STORE, links={"coordinator": forged}, config={})
            await process.exited.wait()
            assert process.returncode == 1
            assert "refused: authentication failed" in capfd.readouterr().err
            assert [reason for _peer, reason in listener.refused] == [f"link {offer.id!r}: wrong secret"]
            assert "connect link refused from 127.0.0.1" in caplog.text and "wrong secret" in caplog.text
            assert offer.spec["secret"] not in caplog.text
            # The offer is still open to its rightful dialer, and taken once only.
            good = await dial_link(offer.spec)
            taken = await offer.accept()
            with pytest.raises(LinkRefused, match="authentication failed"):
                await dial_link(offer.spec)
            assert listener.refused[-1][1] == f"link {offer.id!r}: unknown or already taken"
            # The bytes after the answer are the link's: nothing is lost between them.
            await taken.send_all(b"after the answer")
            assert await good.receive_some(100) == b"after the answer"
            await good.aclose()
            await taken.aclose()


async def test_a_dialer_that_never_authenticates_is_dropped_and_a_dead_listener_is_one_clear_error():
    with trio.fail_after(30):
        async with open_link_listener(auth_timeout=0.2) as listener:
            host, port = listener.address.rsplit(":", 1)
            silent = await trio.open_tcp_stream(host, int(port))
            assert await silent.receive_some(10) == b""  # dropped without an answer
            assert "no valid authentication frame" in listener.refused[-1][1]
            spec = listener.offer("ui").spec
        with pytest.raises(LinkRefused, match=rf"link 'ui-[0-9a-f]+' at 127.0.0.1:{port}: "):
            await dial_link(spec)


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.one_of(
    st.binary(max_size=64),
    st.integers(0, 2**32 - 1).map(lambda n: n.to_bytes(4, "big")),
    st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=12), lambda inner: st.lists(inner, max_size=3)
                 | st.dictionaries(st.sampled_from(["link", "secret", "x"]), inner, max_size=3), max_leaves=8)
    .map(lambda v: (b := json.dumps(v).encode(), len(b).to_bytes(4, "big") + b)[1]),
))  # fmt: skip
def test_hostile_authentication_frames_are_refused_and_the_listener_goes_on(data):
    async def main() -> None:
        with trio.fail_after(20):
            async with open_link_listener(auth_timeout=0.5) as listener:
                offer = listener.offer("ui")
                host, port = listener.address.rsplit(":", 1)
                stream = await trio.open_tcp_stream(host, int(port))
                try:  # the listener may refuse (and close) before all of it is sent
                    await stream.send_all(data)
                    await stream.send_eof()
                    while await stream.receive_some(4096):
                        pass
                except trio.BrokenResourceError:
                    pass
                await stream.aclose()  # (a refusal is recorded before the listener closes)
                assert len(listener.refused) == 1
                good = await dial_link(offer.spec)
                await (await offer.accept()).aclose()
                await good.aclose()

    trio.run(main)
