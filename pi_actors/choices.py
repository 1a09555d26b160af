"""The values a user may choose for the thinking level and the sandbox mode, defined once.

A leaf module with no imports, below every layer: the CLI's argument parsers need these lists
before anything heavy is imported (``pi-actors --help`` stays fast); ``ai.types`` builds its
``ThinkingLevel`` type, ``coding.sandbox`` its ``MODES`` and ``protocol.config`` its Literal
types to match them (checked by tests/test_runtime_config.py).
"""

from __future__ import annotations

__all__ = ["THINKING_LEVELS", "SANDBOX_MODES"]

#: Weakest first: ``off``, then the levels a request can carry (``ai.types.ThinkingLevel``).
#: The one list the CLI, serve, the TUI, the RPC mode and the coordinator check a level against.
THINKING_LEVELS: tuple[str, ...] = ("off", "minimal", "low", "medium", "high", "xhigh")

#: Where sandboxed tools may write: nowhere outside a private /tmp (``read-only``), also the
#: workspace (``workspace-write``), or no sandbox at all (``off``).
SANDBOX_MODES: tuple[str, ...] = ("off", "read-only", "workspace-write")
