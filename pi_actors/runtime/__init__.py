"""Generic actor runtime: wire protocol, connections, spawning. Knows nothing of agents.

Public surface:

- ``protocol`` — the sans-I/O core (frames, strict CBOR, hello, call/chunk/result/cancel).
- ``open_peer`` / ``Peer`` / ``IncomingCall`` / ``OutgoingCall`` — one connection driven
  by trio over any ``trio.abc.Stream``.
- ``RemoteError`` / ``ConnectionLost`` — how a call fails.
- ``start_actor`` / ``link_pair`` — run an actor in a child process linked by socketpairs.
"""

from . import protocol
from ._peer import ConnectionLost, Handler, IncomingCall, OutgoingCall, Peer, RemoteError, open_peer
from ._log import JsonLog
from ._process import ChildProcess
from ._spawn import child_environment, link_pair, start_actor

__all__ = [
    "protocol",
    "ConnectionLost",
    "Handler",
    "IncomingCall",
    "OutgoingCall",
    "Peer",
    "RemoteError",
    "open_peer",
    "ChildProcess",
    "JsonLog",
    "child_environment",
    "link_pair",
    "start_actor",
]
