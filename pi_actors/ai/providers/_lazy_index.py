"""Deferred package indexes for the provider SDKs: importing ``openai`` without building every
model class it ships.

The SDK keeps its wire types in ``openai.types``, a tree of packages whose ``__init__`` only
re-exports every submodule (``from .batch import Batch as Batch`` ... hundreds of pydantic
model classes). The SDK's own modules import what they use by submodule (``from
..types.chat import ChatCompletionFunctionToolParam``), but each such import runs the index of
every package on the way, so ``import openai`` builds all of ``openai.types`` (1050 modules
loaded, 665 without): the SDK import is the longest step of the provider actor's start-up,
the critical path to the first request. Deferring the indexes cut the CPU time of the
provider's SDK import and warm-up by about a third (benchmarks/RESULTS.md, notes).

:func:`defer_indexes` installs a finder that gives every package under a prefix a loader
which creates the package (``__path__``, ``__spec__``: its submodules import as usual) but
runs its ``__init__`` only when a name is looked up on it that is not there yet — a module
``__getattr__``, which Python consults only for missing attributes. So ``from .types.chat
import X`` imports ``types/chat/completion.py`` and whatever that imports, and ``openai.types.
Batch`` (or ``from openai.types import *``) still works: it runs the whole index first, as
an eager import would have. Behaviour is unchanged; only what is never used is never built.

Thread safety: the provider imports its SDK in a worker thread while the event loop runs;
the deferred ``__init__`` runs once, under a lock, and a second thread asking meanwhile waits
for it.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import sys
import threading
from collections.abc import Sequence
from types import ModuleType
from typing import Any

__all__ = ["defer_indexes", "DEFERRED_SDK_INDEXES"]

#: The packages whose indexes are deferred. (``anthropic.types`` has the same shape, but
#: ``import anthropic`` reaches most of it through its eagerly imported resources anyway:
#: deferring it measured no gain.)
DEFERRED_SDK_INDEXES = ("openai.types",)

_installed: set[str] = set()
_lock = threading.Lock()


def defer_indexes(prefixes: Sequence[str] = DEFERRED_SDK_INDEXES) -> None:
    """Defer the ``__init__`` of every package named ``prefix`` or under it, for each of
    ``prefixes``, in modules imported from now on (see the module docstring). Idempotent;
    packages already imported are left as they are."""
    with _lock:
        new = tuple(p for p in prefixes if p not in _installed)
        if not new:
            return
        _installed.update(new)
        sys.meta_path.insert(0, _DeferringFinder(new))


class _DeferringFinder(importlib.abc.MetaPathFinder):
    """Finds the packages under its prefixes through the rest of ``sys.meta_path`` and wraps
    their loader in a :class:`_DeferredIndexLoader`; everything else is left to the others."""

    def __init__(self, prefixes: tuple[str, ...]) -> None:
        self.prefixes = prefixes

    def find_spec(self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if not any(fullname == p or fullname.startswith(p + ".") for p in self.prefixes):
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                break
        else:
            return None
        if spec.submodule_search_locations is None or spec.loader is None:
            return spec  # a plain module: imported as usual
        spec.loader = _DeferredIndexLoader(spec.loader)
        return spec


class _DeferredIndexLoader(importlib.abc.Loader):
    """Creates the package module now and runs its ``__init__`` on the first lookup of a
    name the package does not have yet."""

    def __init__(self, real: importlib.abc.Loader) -> None:
        self.real = real

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self.real.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        real = self.real
        lock = threading.RLock()
        state = {"done": False, "running": False}

        def __getattr__(name: str) -> Any:
            with lock:
                if not state["done"] and not state["running"]:
                    # (A lookup from inside the ``__init__`` itself, e.g. ``from . import x``
                    # asking whether ``x`` is there yet, must not start it a second time.)
                    state["running"] = True
                    try:
                        real.exec_module(module)
                    finally:
                        state["running"] = False
                    state["done"] = True
                    if module.__dict__.get("__getattr__") is __getattr__:
                        del module.__dict__["__getattr__"]
            if name in module.__dict__:
                return module.__dict__[name]
            own = module.__dict__.get("__getattr__")
            if own is not None and own is not __getattr__:
                return own(name)  # the package's own module __getattr__, if it has one
            raise AttributeError(f"module {module.__name__!r} has no attribute {name!r}")

        module.__getattr__ = __getattr__  # type: ignore[method-assign]
