"""Typed methods: the one way an actor declares what it accepts and a caller calls it.

Theory of operation
-------------------
An actor's contract is an :class:`Interface`: a named set of :class:`Method` declarations,
each binding a wire method name to msgspec Structs — its arguments, its chunk type (for a
streaming method), its result — and the error codes it may answer with. The declaration is
data, written once in a public protocol module, and everything else is derived from it: the
server side (a :class:`Router`), the caller side (:func:`call_method`, :func:`open_method`),
the documentation and the CDDL of ``proto/``.

Server side. A :class:`Router` is a ``Handler`` for ``open_peer``. For every incoming call it

1. finds the method (unknown: ``not_found``);
2. converts ``call.args`` (a CBOR tree; absent means ``{}``) to the method's argument
   Struct, strictly — a missing or mistyped field is ``invalid_request`` naming the field
   (``$.path.to.field``), before any handler code runs;
3. applies the method's cancellation policy (``cooperative``: the handler watches
   ``call.cancel_requested`` and answers itself; otherwise a cancel cancels the handler);
4. runs the handler with the typed arguments and a :class:`TypedCall` through which it sends
   typed chunks;
5. turns the handler's return value (an instance of the result Struct, or ``None`` for
   :class:`Empty`) into the wire tree; a ``RemoteError`` raised from inside nurseries is
   answered as that error (the peer flattens exception groups of refusals, in one place).

Caller side. :func:`call_method` / :func:`open_method` encode a Struct of arguments, and
convert the answer (chunks and result) back to the declared types; a callee that answers
something else is reported as ``invalid_response`` — a remote fault, never a crash of the
caller.

Schema evolution (PROTOCOL §9): a new field gets a default, nothing changes type, and a
receiver ignores keys it does not know (argument and result Structs never forbid unknown
fields). Encoding omits fields that hold their default, so an old receiver sees old messages.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import msgspec

from ._peer import IncomingCall, OutgoingCall, Peer, RemoteError

__all__ = [
    "Empty",
    "Interface",
    "Method",
    "Router",
    "TypedCall",
    "TypedOutgoingCall",
    "WireStruct",
    "call_method",
    "implements",
    "open_method",
    "interface_methods",
    "INVALID_RESPONSE",
]

#: The callee answered with a result or chunk that does not match the method's declaration.
INVALID_RESPONSE = "invalid_response"


class WireStruct(msgspec.Struct, kw_only=True, rename="camel", omit_defaults=True, repr_omit_defaults=True):
    """Base of every argument, chunk and result Struct: snake_case in Python, camelCase on
    the wire, fields holding their default left out of the encoding, unknown keys ignored."""


class Empty(WireStruct):
    """No arguments / no result: ``{}`` on the wire (an absent ``args`` is read as ``{}``)."""


A = TypeVar("A")
C = TypeVar("C")
R = TypeVar("R")


@dataclass(frozen=True, eq=False)
class Method(Generic[A, C, R]):
    """One method of an actor's interface.

    Attributes:
      name: the wire method name.
      args: the argument Struct (``Empty`` for none).
      result: the result Struct (``Empty`` for ``{}``).
      chunk: the type of each streamed chunk (a Struct or a tagged union of Structs), or
        ``None`` for a method that streams nothing.
      errors: error code -> when it is answered, beyond the codes every method may answer
        (``invalid_request``, ``not_found``, ``cancelled``, ``internal``).
      cooperative: the handler watches ``cancel_requested`` and finishes with its own result
        instead of being cancelled.
      doc: one paragraph for the method table.
    """

    name: str
    args: type[A]
    result: type[R]
    chunk: Any = None
    errors: Mapping[str, str] = field(default_factory=dict)
    cooperative: bool = False
    doc: str = ""

    def decode_args(self, tree: Any) -> A:
        """The typed arguments of a call; RemoteError ``invalid_request`` naming the field."""
        try:
            return msgspec.convert({} if tree is None else tree, self.args, strict=True)
        except msgspec.ValidationError as exc:
            raise RemoteError("invalid_request", f"{self.name}: {exc}") from None

    def decode_result(self, tree: Any) -> R:
        """The typed result; RemoteError ``invalid_response`` when the callee broke the contract."""
        try:
            return msgspec.convert({} if tree is None else tree, self.result, strict=True)
        except msgspec.ValidationError as exc:
            raise RemoteError(INVALID_RESPONSE, f"{self.name}: the result does not match the method: {exc}") from None

    def decode_chunk(self, tree: Any) -> C:
        """One typed chunk; RemoteError ``invalid_response`` when the callee broke the contract."""
        if self.chunk is None:
            raise RemoteError(INVALID_RESPONSE, f"{self.name}: the callee streamed a chunk; this method streams none")
        try:
            chunk: C
            if isinstance(self.chunk, type):
                chunk = msgspec.convert(tree, self.chunk, strict=True)
            else:
                # A union (e.g. tagged stream events): msgspec re-analyses a bare union on
                # every convert (~100 µs); inside a Struct field the analysis is cached (~5 µs).
                chunk = msgspec.convert({"value": tree}, _boxed(self.chunk), strict=True).value
            return chunk
        except msgspec.ValidationError as exc:
            detail = str(exc).replace("$.value", "$", 1)
            raise RemoteError(INVALID_RESPONSE, f"{self.name}: a chunk does not match the method: {detail}") from None


@functools.cache
def _boxed(kind: Any) -> Any:
    """A Struct with one field ``value`` of type ``kind``: converting through it caches
    msgspec's analysis of ``kind``."""
    return msgspec.defstruct("Boxed", [("value", kind)])


class Interface:
    """The named set of methods one actor serves (its whole contract)."""

    def __init__(self, name: str, methods: Iterable[Method[Any, Any, Any]], doc: str = "") -> None:
        self.name = name
        self.doc = doc
        self.methods: dict[str, Method[Any, Any, Any]] = {}
        for method in methods:
            if method.name in self.methods:
                raise ValueError(f"{name}: method {method.name!r} declared twice")
            self.methods[method.name] = method

    def __contains__(self, name: object) -> bool:
        return name in self.methods

    def __iter__(self) -> Iterator[Method[Any, Any, Any]]:
        return iter(self.methods.values())

    def __repr__(self) -> str:
        return f"Interface({self.name!r}, {sorted(self.methods)})"


def _to_wire(value: Any) -> Any:
    return msgspec.to_builtins(value, builtin_types=(bytes,))


class TypedCall(Generic[A, C]):
    """An incoming call as a handler sees it: typed ``args``, typed ``send``.

    Attributes:
      args: the decoded argument Struct.
      incoming: the underlying ``IncomingCall`` (``target``, ``id``).
      cancel_requested: set when the caller asked to cancel (see ``Method.cooperative``).
    """

    def __init__(self, method: Method[A, C, Any], incoming: IncomingCall, args: A) -> None:
        self.method = method
        self.incoming = incoming
        self.args = args
        self.cancel_requested = incoming.cancel_requested

    async def send(self, chunk: C) -> None:
        """Send one chunk of this call's stream (a value of the method's chunk type).

        Raises ``TypeError`` for a method that streams nothing (a bug in the handler), and
        whatever ``IncomingCall.send_chunk`` raises (``ConnectionLost``, ``MessageTooLarge``,
        ``RemoteError("internal")`` for a value the wire cannot carry)."""
        if self.method.chunk is None:
            raise TypeError(f"{self.method.name} declares no chunks")
        await self.incoming.send_chunk(_to_wire(chunk))


HandlerFn = Callable[[Any, TypedCall[Any, Any]], Awaitable[Any]]


def implements(method: Method[Any, Any, Any]) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Mark an actor's (async) method as the handler of ``method``; see ``Router.serving``.

    The handler is called as ``await handler(args, call)`` and returns an instance of the
    method's result Struct (``None`` for ``Empty``), or is an async generator whose items are
    sent as chunks (its result is then ``Empty``)."""

    def mark(fn: Callable[..., Any]) -> Callable[..., Any]:
        fn.__pi_method__ = method  # type: ignore[attr-defined]
        return fn

    return mark


class Router:
    """Serves typed methods: a ``Handler`` for ``open_peer`` (see the module docstring).

    Build one with ``Router(name)`` and ``bind``, or with ``Router.serving(obj, *interfaces)``
    from an object whose methods are marked ``@implements(METHOD)``. ``fallback`` serves any
    method no interface declares (e.g. a proxy that forwards calls); without it such a call
    is ``not_found``.
    """

    def __init__(self, name: str, *, fallback: Callable[[IncomingCall], Awaitable[Any]] | None = None) -> None:
        self.name = name
        self.fallback = fallback
        self._routes: dict[str, tuple[Method[Any, Any, Any], HandlerFn]] = {}

    def bind(self, method: Method[Any, Any, Any], handler: HandlerFn) -> None:
        """Serve ``method`` with ``handler``; binding a method twice is a bug (ValueError)."""
        if method.name in self._routes:
            raise ValueError(f"{self.name}: {method.name!r} is already bound")
        self._routes[method.name] = (method, handler)

    @classmethod
    def serving(
        cls,
        obj: object,
        *interfaces: Interface,
        name: str | None = None,
        fallback: Callable[[IncomingCall], Awaitable[Any]] | None = None,
    ) -> Router:
        """A router for every ``@implements``-marked method of ``obj``.

        Raises ValueError when a method of ``interfaces`` has no handler, or a handler
        implements a method none of ``interfaces`` declares: the contract and the code
        cannot drift apart silently."""
        router = cls(name or type(obj).__name__, fallback=fallback)
        declared = {m.name: m for iface in interfaces for m in iface}
        for attr in dir(type(obj)):
            fn = getattr(type(obj), attr, None)
            method: Method[Any, Any, Any] | None = getattr(fn, "__pi_method__", None)
            if method is None:
                continue
            if declared.get(method.name) is not method:  # a method object, compared by identity
                raise ValueError(f"{router.name}.{attr} implements {method.name!r}, which its interfaces do not declare")
            router.bind(method, getattr(obj, attr))
        missing = sorted(set(declared) - set(router._routes))
        if missing:
            raise ValueError(f"{router.name}: no handler for {', '.join(missing)}")
        return router

    @property
    def methods(self) -> dict[str, Method[Any, Any, Any]]:
        return {name: method for name, (method, _) in self._routes.items()}

    async def __call__(self, call: IncomingCall) -> Any:
        route = self._routes.get(call.method)
        if route is None:
            if self.fallback is not None:
                return await self.fallback(call)
            raise RemoteError("not_found", f"{self.name}: unknown method {call.method!r}")
        method, handler = route
        args = method.decode_args(call.args)
        call.cooperative = method.cooperative
        typed: TypedCall[Any, Any] = TypedCall(method, call, args)
        if inspect.isasyncgenfunction(handler):
            async with _aclosing(handler(args, typed)) as items:
                async for item in items:
                    await typed.send(item)
            return {}
        value = await handler(args, typed)
        if value is None:
            if method.result is not Empty:
                raise TypeError(f"{self.name}.{method.name} returned None; it declares {method.result.__name__}")
            return {}
        if isinstance(method.result, type) and not isinstance(value, method.result):
            raise TypeError(f"{self.name}.{method.name} returned {type(value).__name__}; it declares {method.result.__name__}")
        return _to_wire(value)


@asynccontextmanager
async def _aclosing(gen: Any) -> AsyncIterator[Any]:
    try:
        yield gen
    finally:
        await gen.aclose()


class TypedOutgoingCall(Generic[C, R]):
    """A typed call in flight: iterate it for typed chunks, then ``await result()``."""

    def __init__(self, method: Method[Any, C, R], raw: OutgoingCall) -> None:
        self.method = method
        self.raw = raw

    def __aiter__(self) -> TypedOutgoingCall[C, R]:
        return self

    async def __anext__(self) -> C:
        return self.method.decode_chunk(await self.raw.__anext__())

    async def result(self) -> R:
        """Drain the chunks left and return the typed result; raises RemoteError."""
        async for _ in self.raw:
            pass
        return self.method.decode_result(await self.raw.result())

    async def cancel(self) -> None:
        await self.raw.cancel()


async def call_method(peer: Peer, method: Method[A, Any, R], args: A | None = None, *, target: str = "") -> R:
    """Call ``method`` on ``peer`` and return its typed result (chunks, if any, are dropped).

    Raises RemoteError (the callee's refusal, ``invalid_response``, ``ConnectionLost``)."""
    value = await peer.call(method.name, None if args is None else _to_wire(args), target=target)
    return method.decode_result(value)


@asynccontextmanager
async def open_method(
    peer: Peer, method: Method[A, C, R], args: A | None = None, *, target: str = ""
) -> AsyncIterator[TypedOutgoingCall[C, R]]:
    """Start a streaming call of ``method``; leaving the block early cancels it remotely."""
    async with peer.open_call(method.name, None if args is None else _to_wire(args), target=target) as raw:
        yield TypedOutgoingCall(method, raw)


def interface_methods(*interfaces: Interface) -> dict[str, Method[Any, Any, Any]]:
    """Every method of ``interfaces`` by name (later interfaces cannot redeclare a name)."""
    out: dict[str, Method[Any, Any, Any]] = {}
    for iface in interfaces:
        for method in iface:
            if method.name in out:
                raise ValueError(f"{method.name!r} is declared by two interfaces")
            out[method.name] = method
    return out

