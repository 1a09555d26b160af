"""Test helpers that speak real wires: the scripted LLM server (see ``scripted_server``).

The names load on first use, so ``python -m pi_actors.testing.scripted_server`` does not find
its own module imported already by this package.
"""

from __future__ import annotations

from typing import Any

__all__ = ["ScriptedLLM", "Reply", "ScriptToolCall", "ScriptUsage", "load_script"]

_WHERE = {"ScriptedLLM": "scripted_server", "load_script": "scripted_server", "Reply": "wire_formats",
          "ScriptToolCall": "wire_formats", "ScriptUsage": "wire_formats"}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module

    return getattr(import_module(f"{__name__}.{module}"), name)
