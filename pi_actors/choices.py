"""The values a user may choose — thinking level, sandbox mode, queue and tool-execution
modes — defined once, as Literal types and the tuples of their values.

A leaf module importing only ``typing``, below every layer: the CLI's argument parsers need
these lists before anything heavy is imported (``pi-actors --help`` stays fast), and the
actor processes' configuration (``protocol.config``) types its fields with them without
importing the agent. ``agent`` re-exports the Literal types under its own names
(``AgentThinkingLevel``, ``QueueMode``, ``ToolExecutionMode``); ``ai.types.ThinkingLevel``
(the levels a request can carry: all but ``off``) and ``coding.sandbox.MODES`` are checked
against them by tests/test_runtime_config.py.
"""

from __future__ import annotations

from typing import Literal, get_args

__all__ = [
    "ThinkingChoice",
    "SandboxMode",
    "QueueMode",
    "ToolExecutionMode",
    "THINKING_LEVELS",
    "SANDBOX_MODES",
]

#: Weakest first: ``off``, then the levels a request can carry.
ThinkingChoice = Literal["off", "minimal", "low", "medium", "high", "xhigh"]
#: Where sandboxed tools may write: no sandbox (``off``), nowhere but a private /tmp
#: (``read-only``), also the workspace (``workspace-write``).
SandboxMode = Literal["off", "read-only", "workspace-write"]
#: How queued steering / follow-up messages are delivered: one per turn, or all at once.
QueueMode = Literal["one-at-a-time", "all"]
#: How the tool calls of one assistant message run.
ToolExecutionMode = Literal["parallel", "sequential"]

#: The one list the CLI, serve, the TUI, the RPC mode and the coordinator check a level against.
THINKING_LEVELS: tuple[str, ...] = get_args(ThinkingChoice)
SANDBOX_MODES: tuple[str, ...] = get_args(SandboxMode)
