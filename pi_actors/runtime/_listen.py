"""A unix-socket listener whose file system permissions are the authentication.

``open_unix_listener(path)`` makes the socket's directory if needed with mode 0700 (an
existing directory must not be accessible to group or others), refuses to replace a live
socket or a file that is not a socket (a stale socket is removed), binds, and sets the
socket 0600. ``remove_own_socket`` removes the path only if it is still our inode.

``unix_peer_refusal(sock)`` checks who is on the other end of an accepted connection
(``SO_PEERCRED``, the credentials the kernel recorded at ``connect``): the peer must run
as the server's own effective uid, and in the server's own pid, mount and user namespaces.
Every sandbox pi-actors runs (bubblewrap) has at least its own mount namespace, so a
sandboxed tool that somehow reaches the socket is refused even if the file permissions let
it connect; so is another user (root included). A peer that cannot be inspected (its
process exited, or /proc hides it) is refused: the check fails closed. Where the kernel
offers ``SO_PEERPIDFD`` (Linux ≥ 6.5) the peer's process is pinned while it is inspected,
so a recycled pid cannot pass for it. Returns None for a peer to accept, else the reason.
``refusal_frame(reason)`` is the one ``hello_error{code: "unauthorized"}`` frame to send
such a peer before closing.

``serve_unix_admitted(path, serve_stream, admission)`` puts it together: it binds ``path``
(``open_unix_listener``), accepts through ``_accept.serve_admitted`` (connection caps,
back-off on EMFILE), refuses peers as above (one warning each, one ``hello_error`` frame,
then close), hands every other connection to ``serve_stream`` and removes the socket when
cancelled.
"""

from __future__ import annotations

import errno
import os
import socket
import stat
import struct
from collections.abc import Awaitable, Callable
from typing import Any

import trio

from ._accept import Admission, Ticket, serve_admitted

__all__ = ["serve_unix_admitted", "open_unix_listener", "remove_own_socket", "ListenError", "unix_peer_refusal", "refusal_frame", "UNAUTHORIZED"]

#: hello_error code for a peer the listener refuses.
UNAUTHORIZED = "unauthorized"
_SO_PEERPIDFD = getattr(socket, "SO_PEERPIDFD", 77)  # Linux ≥ 6.5
_CREDS = struct.Struct("3i")
_NAMESPACES = ("pid", "mnt", "user")


class ListenError(Exception):
    pass


def _prepare_dir(directory: str) -> None:
    if not os.path.exists(directory):
        os.makedirs(directory, mode=0o700)
        os.chmod(directory, 0o700)
        return
    st = os.stat(directory)
    if not stat.S_ISDIR(st.st_mode):
        raise ListenError(f"{directory} is not a directory")
    if st.st_mode & 0o077:
        raise ListenError(f"{directory} is accessible to other users (mode {st.st_mode & 0o777:o}); use a 0700 directory")


def _clear_stale(path: str) -> None:
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(st.st_mode):
        raise ListenError(f"{path} exists and is not a socket")
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.connect(path)
    except OSError as exc:
        if exc.errno in (errno.ECONNREFUSED, errno.ENOENT):
            os.unlink(path)
            return
        raise ListenError(f"cannot probe {path}: {exc}") from None
    else:
        raise ListenError(f"{path} is in use by a running server")
    finally:
        probe.close()


async def open_unix_listener(path: str, backlog: int = 128) -> tuple[trio.SocketListener, tuple[int, int]]:
    """Bind ``path`` (see the module docstring); returns the listener and our inode key."""
    path = os.path.abspath(path)
    _prepare_dir(os.path.dirname(path))
    _clear_stale(path)
    sock = trio.socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)
    try:
        await sock.bind(path)
    finally:
        os.umask(old)
    os.chmod(path, 0o600)
    sock.listen(backlog)
    st = os.stat(path)
    return trio.SocketListener(sock), (st.st_dev, st.st_ino)


def remove_own_socket(path: str, key: tuple[int, int]) -> None:
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if (st.st_dev, st.st_ino) == key:
        os.unlink(path)


def _pidfd_pid(pidfd: int) -> int | None:
    """The pid a pidfd refers to (-1 once the process exited), from /proc/self/fdinfo."""
    with open(f"/proc/self/fdinfo/{pidfd}", encoding="ascii") as f:
        for line in f:
            if line.startswith("Pid:"):
                return int(line.split()[1])
    return None


def unix_peer_refusal(sock: Any) -> str | None:
    """None if the peer of the connected unix socket ``sock`` may talk to the server, else
    why not (see the module docstring). ``sock`` is a stdlib or trio socket."""
    if not hasattr(socket, "SO_PEERCRED") or not os.path.isdir("/proc/self/ns"):
        return "this platform cannot tell the server who the peer is (SO_PEERCRED and /proc are Linux's)"
    pid, uid, _gid = _CREDS.unpack(sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _CREDS.size))
    if uid != os.geteuid():
        return f"the peer runs as uid {uid}; this server accepts only its own uid ({os.geteuid()})"
    if pid <= 0:
        return "the peer's process is not visible from the server (another pid namespace: a sandbox?)"
    pidfd = -1
    try:
        pidfd = int.from_bytes(sock.getsockopt(socket.SOL_SOCKET, _SO_PEERPIDFD, 4), "little", signed=True)
    except OSError:
        pidfd = -1  # an older kernel: fall back to the pid alone
    try:
        for ns in _NAMESPACES:
            try:
                ours = os.readlink(f"/proc/self/ns/{ns}")
                theirs = os.readlink(f"/proc/{pid}/ns/{ns}")
            except OSError as exc:
                return f"cannot inspect the peer process {pid}: {exc.strerror or exc}"
            if theirs != ours:
                return f"the peer (pid {pid}) runs in another {ns} namespace than the server (inside a sandbox?)"
        if pidfd >= 0:
            try:
                alive = _pidfd_pid(pidfd) == pid
            except (OSError, ValueError):
                alive = False
            if not alive:
                return f"the peer process {pid} exited before it could be checked"
    finally:
        if pidfd >= 0:
            os.close(pidfd)
    return None


def refusal_frame(reason: str) -> bytes:
    """The frame of a ``hello_error{code: "unauthorized", message: reason}``."""
    from ._codec import encode_message
    from ._framing import encode_frame
    from ._messages import HelloError

    return encode_frame(encode_message(HelloError(code=UNAUTHORIZED, message=f"connection refused: {reason}")))


async def serve_unix_admitted(
    path: str,
    serve_stream: Callable[[trio.SocketStream], Awaitable[None]],
    admission: Admission,
    *,
    task_status: Any = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve ``path`` until cancelled (see the module docstring); ``task_status`` gets the
    absolute path. Raises ListenError if the socket cannot be set up."""
    import logging

    log = logging.getLogger("pi_actors.server")

    async def handle(stream: trio.SocketStream, ticket: Ticket) -> None:
        reason = unix_peer_refusal(stream.socket)
        if reason is not None:
            log.warning("server: refused a connection on %s: %s", path, reason)
            try:
                await stream.send_all(refusal_frame(reason))
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                pass
            return
        ticket.admit()
        await serve_stream(stream)

    path = os.path.abspath(path)
    listener, key = await open_unix_listener(path)
    try:
        async with listener, trio.open_nursery() as nursery:
            await nursery.start(serve_admitted, listener, handle, admission)
            task_status.started(path)
    finally:
        remove_own_socket(path, key)
