"""User extensions: pi's extension API in Python naming (docs/extensions.md).

An extension is a Python file or package whose ``register(pi)`` receives an
:class:`ExtensionAPI` and registers tools, ``/commands``, event handlers (:data:`EVENTS`),
flags, shortcuts, message renderers and providers. Extensions run in the extension-host
actor (``pi_actors.actors.extension_host``), never in the coordinator.

This package is the part that knows nothing of processes: the API object and ``ctx``
(``_api``), finding and importing extensions (``_loader``), running what they registered
(``_dispatch``). Layer: imports agent/ai/coding only.
"""

from __future__ import annotations

from ._api import UI, Bridge, Context, ExtensionAPI, RegisteredFlag
from ._dispatch import Extensions, HandlerError
from ._loader import ExtensionLoadError, discover_extension_specs, expand_spec, load_extension_module, load_specs
from .events import EVENTS, RESULT_EVENTS

__all__ = [
    "EVENTS",
    "RESULT_EVENTS",
    "UI",
    "Bridge",
    "Context",
    "ExtensionAPI",
    "ExtensionLoadError",
    "Extensions",
    "HandlerError",
    "RegisteredFlag",
    "discover_extension_specs",
    "expand_spec",
    "load_extension_module",
    "load_specs",
]
