"""A control channel between a supervisor and an actor: JSON lines that may carry a socket.

Why: when a supervisor restarts an actor, the actors linked to it need the new link, and the
supervisor is the only process that may create it (it alone holds what the new actor needs,
e.g. the provider's API keys). Over a unix stream socket, a message whose line says
``"fd": true`` travels with one file descriptor (``SCM_RIGHTS``), attached to the line's
first byte; the receiver hands out descriptors in the order their lines complete.

Contract: ``send(message, sock=None)`` writes one line (``sock`` is duplicated into the
peer; the caller still owns and closes its own); ``receive()`` returns the next
``(message, socket or None)`` and raises ``EOFError`` at end of stream. One sender task and
one receiver task at a time. Malformed lines (not JSON, not an object, nested too deeply,
longer than 64 KiB, announcing a descriptor that did not come) raise ``ValueError`` and
nothing else, so a reader can stop cleanly on any input.
"""

from __future__ import annotations

import array
import json
import socket
from collections import deque
from typing import Any

import trio

__all__ = ["FdChannel"]

_MAX_FDS = 8
#: Control messages are small (a name, a path): a longer line is refused.
_MAX_LINE = 65536


class FdChannel:
    def __init__(self, sock: trio.socket.SocketType) -> None:
        self._sock = sock
        self._buffer = b""
        self._fds: deque[int] = deque()
        self._lines: deque[bytes] = deque()
        self._eof = False

    @classmethod
    def from_stream(cls, stream: trio.SocketStream) -> FdChannel:
        return cls(stream.socket)

    async def send(self, message: dict[str, Any], sock: socket.socket | None = None) -> None:
        """Send ``message`` (and a duplicate of ``sock``). Raises trio.BrokenResourceError
        (or OSError) if the peer is gone."""
        if sock is not None:
            message = {**message, "fd": True}
        data = json.dumps(message).encode() + b"\n"
        ancillary = []
        if sock is not None:
            ancillary = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [sock.fileno()]))]
        sent = await self._sock.sendmsg([data], ancillary)
        while sent < len(data):
            sent += await self._sock.send(data[sent:])

    async def receive(self) -> tuple[dict[str, Any], socket.socket | None]:
        while not self._lines:
            if self._eof:
                raise EOFError("control channel closed")
            await self._fill()
        line = self._lines.popleft()
        try:
            message = json.loads(line)
        except RecursionError:
            raise ValueError("control message nested too deeply") from None
        if not isinstance(message, dict):
            raise ValueError("control message is not an object")
        sock = None
        if message.pop("fd", False):
            if not self._fds:
                raise ValueError("control message announced a descriptor that did not arrive")
            sock = socket.socket(fileno=self._fds.popleft())
        return message, sock

    async def _fill(self) -> None:
        flags = getattr(socket, "MSG_CMSG_CLOEXEC", 0)
        data, ancdata, _flags, _addr = await self._sock.recvmsg(65536, socket.CMSG_SPACE(_MAX_FDS * 4), flags)
        for level, kind, payload in ancdata:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds = array.array("i")
                fds.frombytes(payload[: len(payload) - len(payload) % fds.itemsize])
                self._fds.extend(fds)
        if not data:
            self._eof = True
            return
        self._buffer += data
        *complete, self._buffer = self._buffer.split(b"\n")
        self._lines.extend(line for line in complete if line.strip())
        if len(self._buffer) > _MAX_LINE or any(len(line) > _MAX_LINE for line in complete):
            raise ValueError(f"control message longer than {_MAX_LINE} bytes")

    def close(self) -> None:
        while self._fds:
            try:
                socket.socket(fileno=self._fds.popleft()).close()
            except OSError:
                pass
