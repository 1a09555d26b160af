"""Test helpers that speak real wires: the scripted LLM server (see ``scripted_server``)."""

from .scripted_server import ScriptedLLM, load_script
from .wire_formats import Reply, ScriptToolCall, ScriptUsage

__all__ = ["ScriptedLLM", "Reply", "ScriptToolCall", "ScriptUsage", "load_script"]
