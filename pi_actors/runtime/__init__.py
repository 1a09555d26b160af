"""Generic actor runtime: wire protocol, connections, spawning. Knows nothing of agents.

Public surface:

- ``protocol`` — the sans-I/O core (frames, strict CBOR, hello, call/chunk/result/cancel).
- ``open_peer`` / ``Peer`` / ``IncomingCall`` / ``OutgoingCall`` — one connection driven
  by trio over any ``trio.abc.Stream``.
- ``Trigger`` — a call's ``cancel_requested``: an event whose setting also runs callbacks
  (``OutgoingCall.cancel_when`` relays a cancel with one, not with a task per call).
- ``RemoteError`` / ``ConnectionLost`` — how a call fails; ``remote_error_of`` finds the
  refusal inside an exception group (the one place groups of refusals are flattened).
- ``Interface`` / ``Method`` / ``WireStruct`` / ``Empty`` — an actor's typed contract;
  ``Router`` / ``implements`` serve it, ``call_method`` / ``open_method`` call it (``_router``).
- ``open_link_listener`` / ``dial_link`` — *connect links* (``_connect``): an actor link
  dialled over TCP and authenticated with a per-link secret, for actors on another node.
- ``start_actor`` / ``link_pair`` — run an actor in a child process linked by socketpairs;
  ``prestart_actor`` starts one ahead of its configuration (before the event loop runs);
  ``fork_actor`` forks one, sharing this process's imports (``_fork``).
- ``start_watched_actor`` / ``RestartPolicy`` / ``RestartIntensity`` — supervision: liveness
  checks, restart intensity and back-off (``_supervise``); ``FdChannel`` passes a new link
  to a running actor (``_fdpass``).
"""

# An actor process imports what follows with the garbage collector off (pi_actors._startup_gc):
# this must run before any of those imports (hence E402 below, file-wide).
# ruff: noqa: E402
from .._startup_gc import pause_if_started_as

pause_if_started_as("pi_actors.runtime.child")

from . import protocol
from ._connect import LinkListener, LinkOffer, LinkRefused, dial_link, open_link_listener
from ._fdpass import FdChannel
from ._fork import fork_actor
from ._log import JsonLog
from ._peer import (
    PING_METHOD,
    ActorDied,
    ConnectionLost,
    Handler,
    IncomingCall,
    MessageTooLarge,
    OutgoingCall,
    Peer,
    RemoteError,
    Trigger,
    leaf_exceptions,
    open_peer,
    remote_error_of,
)
from ._process import ChildProcess
from ._router import (
    INVALID_RESPONSE,
    Empty,
    Interface,
    Method,
    Router,
    TypedCall,
    TypedOutgoingCall,
    WireStruct,
    call_method,
    implements,
    interface_methods,
    open_method,
)
from ._spawn import PrestartedActor, child_environment, link_pair, prestart_actor, prestart_command, start_actor
from ._supervise import (
    RestartIntensity,
    RestartPolicy,
    TooManyRestarts,
    WatchedActor,
    describe_exit,
    start_watched_actor,
    watch_heartbeat,
)

__all__ = [
    "protocol",
    "LinkListener",
    "LinkOffer",
    "LinkRefused",
    "dial_link",
    "open_link_listener",
    "INVALID_RESPONSE",
    "Empty",
    "Interface",
    "Method",
    "Router",
    "TypedCall",
    "TypedOutgoingCall",
    "WireStruct",
    "call_method",
    "implements",
    "interface_methods",
    "open_method",
    "remote_error_of",
    "leaf_exceptions",
    "ActorDied",
    "ConnectionLost",
    "FdChannel",
    "MessageTooLarge",
    "PING_METHOD",
    "RestartIntensity",
    "RestartPolicy",
    "TooManyRestarts",
    "WatchedActor",
    "describe_exit",
    "start_watched_actor",
    "watch_heartbeat",
    "Handler",
    "IncomingCall",
    "OutgoingCall",
    "Peer",
    "RemoteError",
    "Trigger",
    "open_peer",
    "ChildProcess",
    "JsonLog",
    "child_environment",
    "link_pair",
    "start_actor",
    "prestart_actor",
    "fork_actor",
    "prestart_command",
    "PrestartedActor",
]
