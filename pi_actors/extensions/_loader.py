"""Finding and importing extensions.

A *spec* names what to load: a path (a ``.py`` file, a package directory with
``__init__.py``, or a directory holding such files and packages, each one extension) or
``module:<dotted.name>[:<attr>]`` (an importable module: its ``register``, or ``attr``).

:func:`discover_extension_specs` gives the specs of a session: ``-e`` paths first, then
``~/.pi-actors/extensions/`` and ``<cwd>/.pi-actors/extensions/`` (skipped with
``--no-extensions``), then ``extra`` (e.g. packages' entry points, also skipped by it).
:func:`load_extension_module` calls one module's ``register(pi)``; :func:`load_specs` loads
them all, one failure not stopping the others.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import types
from collections.abc import Callable, Iterable
from typing import Any

from ._api import Bridge, ExtensionAPI, _Registrations

__all__ = [
    "ExtensionLoadError",
    "discover_extension_specs",
    "expand_spec",
    "load_extension_module",
    "load_specs",
]


class ExtensionLoadError(Exception):
    """An extension could not be loaded; the message is one line naming it."""


def _user_dir() -> str:
    return os.path.join(os.path.expanduser("~"), ".pi-actors", "extensions")


def discover_extension_specs(cwd: str, explicit: Iterable[str] = (), *, no_extensions: bool = False,
                             extra: Iterable[str] = (), home_dir: str | None = None) -> list[str]:  # fmt: skip
    """The specs to load, in order, without duplicates. ``explicit`` (``-e``) paths are made
    absolute against ``cwd`` and always kept (a missing one is reported at load); the two
    extension directories and ``extra`` only without ``no_extensions``. ``home_dir``: the
    user directory to use instead of ``~/.pi-actors/extensions``."""
    specs: list[str] = []
    for path in explicit:
        specs.append(path if path.startswith("module:") else os.path.abspath(os.path.join(cwd, os.path.expanduser(path))))
    if not no_extensions:
        for folder in (home_dir or _user_dir(), os.path.join(cwd, ".pi-actors", "extensions")):
            if os.path.isdir(folder):
                specs.extend(_entries(folder))
        specs.extend(extra)
    seen: set[str] = set()
    return [s for s in specs if not (s in seen or seen.add(s))]  # type: ignore[func-returns-value]


def _entries(folder: str) -> list[str]:
    """The extensions of a directory: its ``.py`` files and package directories, sorted."""
    out = []
    for name in sorted(os.listdir(folder)):
        path = os.path.join(folder, name)
        if name.startswith((".", "_")):
            continue
        if (name.endswith(".py") and os.path.isfile(path)) or os.path.isfile(os.path.join(path, "__init__.py")):
            out.append(path)
    return out


def expand_spec(spec: str) -> list[str]:
    """One spec as the extensions it stands for (a directory of extensions is several)."""
    if spec.startswith("module:"):
        return [spec]
    if os.path.isdir(spec) and not os.path.isfile(os.path.join(spec, "__init__.py")):
        return _entries(spec)
    return [spec]


def _import(spec: str) -> Callable[..., Any]:
    """The ``register`` function of one extension. Raises ExtensionLoadError (one line)."""
    if spec.startswith("module:"):
        parts = spec.split(":")
        if len(parts) not in (2, 3) or not parts[1]:
            raise ExtensionLoadError(f"bad extension spec {spec!r} (module:<dotted.name>[:<attr>])")
        try:
            module = importlib.import_module(parts[1])
        except Exception as exc:  # noqa: BLE001 - any import failure is the extension's
            raise ExtensionLoadError(f"cannot import {parts[1]}: {_one_line(exc)}") from None
        attr = parts[2] if len(parts) == 3 else "register"
        target = getattr(module, attr, None)
        if not callable(target):
            raise ExtensionLoadError(f"{parts[1]} has no function {attr}(pi)")
        return target
    if not os.path.exists(spec):
        raise ExtensionLoadError("no such file or directory")
    is_package = os.path.isdir(spec)
    location = os.path.join(spec, "__init__.py") if is_package else spec
    base = os.path.basename(spec.rstrip(os.sep)).removesuffix(".py")
    name = f"pi_actors_ext_{abs(hash(spec)) & 0xFFFFFFFF:x}_{base.replace('-', '_')}"
    module_spec = importlib.util.spec_from_file_location(
        name, location, submodule_search_locations=[spec] if is_package else None
    )
    if module_spec is None or module_spec.loader is None:
        raise ExtensionLoadError("not a Python file or package")
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[name] = module
    try:
        module_spec.loader.exec_module(module)
    except Exception as exc:  # noqa: BLE001 - any failure of the module's code is the extension's
        sys.modules.pop(name, None)
        raise ExtensionLoadError(_one_line(exc)) from None
    return _register_of(module)


def _register_of(module: types.ModuleType) -> Callable[..., Any]:
    register = getattr(module, "register", None)
    if not callable(register):
        raise ExtensionLoadError("no register(pi) function")
    return register


def load_extension_module(api: ExtensionAPI, module: types.ModuleType | Callable[..., Any]) -> None:
    """Call ``module.register(api)`` (or ``module(api)`` for a function). Raises
    ExtensionLoadError with one line if there is none, or it raises."""
    register = module if callable(module) and not isinstance(module, types.ModuleType) else _register_of(module)
    try:
        result = register(api)
    except Exception as exc:  # noqa: BLE001 - the extension's failure, reported in one line
        raise ExtensionLoadError(f"register failed: {_one_line(exc)}") from None
    if hasattr(result, "__await__"):
        getattr(result, "close", lambda: None)()
        raise ExtensionLoadError("register(pi) must be a plain function, not async")


def load_specs(specs: Iterable[str], registry: _Registrations, *, bridge: Bridge | None = None,
               flag_values: dict[str, Any] | None = None) -> tuple[list[str], list[tuple[str, str]]]:  # fmt: skip
    """Load every extension of ``specs`` into ``registry``. Returns the loaded extensions'
    names and ``(name, error)`` for each that failed (skipped: what it registered before
    failing is taken back; the others load)."""
    loaded: list[str] = []
    failed: list[tuple[str, str]] = []
    for spec in specs:
        for one in expand_spec(spec):
            snapshot = _copy(registry)
            try:
                load_extension_module(ExtensionAPI(one, registry, bridge, flag_values), _import(one))
            except ExtensionLoadError as exc:
                _restore(registry, snapshot)
                failed.append((one, str(exc)))
            except ValueError as exc:
                _restore(registry, snapshot)
                failed.append((one, _one_line(exc)))
            else:
                loaded.append(one)
    return loaded, failed


def _copy(registry: _Registrations) -> _Registrations:
    return _Registrations(
        dict(registry.tools), dict(registry.commands), dict(registry.flags), dict(registry.shortcuts),
        list(registry.handlers), dict(registry.renderers), dict(registry.providers),
    )  # fmt: skip


def _restore(registry: _Registrations, snapshot: _Registrations) -> None:
    registry.__dict__.update(snapshot.__dict__)


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return f"{type(exc).__name__}: {text}" if not isinstance(exc, ExtensionLoadError) else text
