"""The thinking levels a user may choose, defined once for every layer.

A leaf module with no imports, below ``ai``: the CLI's argument parser needs the list before
anything heavy is imported (``pi-actors --help`` stays fast), and ``ai.types`` builds its
``ThinkingLevel`` type to match it (checked by a test).
"""

from __future__ import annotations

__all__ = ["THINKING_LEVELS"]

#: Weakest first: ``off``, then the levels a request can carry (``ai.types.ThinkingLevel``).
#: The one list the CLI, serve, the TUI, the RPC mode and the coordinator check a level against.
THINKING_LEVELS: tuple[str, ...] = ("off", "minimal", "low", "medium", "high", "xhigh")
