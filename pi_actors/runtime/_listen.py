"""A unix-socket listener whose file system permissions are the authentication.

``open_unix_listener(path)`` makes the socket's directory if needed with mode 0700 (an
existing directory must not be accessible to group or others), refuses to replace a live
socket or a file that is not a socket (a stale socket is removed), binds, and sets the
socket 0600. ``remove_own_socket`` removes the path only if it is still our inode.
"""

from __future__ import annotations

import errno
import os
import socket
import stat

import trio

__all__ = ["open_unix_listener", "remove_own_socket", "ListenError"]


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
