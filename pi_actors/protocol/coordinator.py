"""PLACEHOLDER (branch `server` only) until the `coord` branch's declaration is merged: the
coordinator's method names, with only ``prompt``'s arguments typed. Replaced by coord's file."""

from __future__ import annotations

from typing import Any

from ..runtime import Empty, Interface, Method, WireStruct


class _Loose(WireStruct):
    """Placeholder arguments: any object."""


class PromptArgs(WireStruct):
    text: str
    events: bool = True


def _m(name: str, args: Any = _Loose) -> Method[Any, Any, Any]:
    return Method(name, args=args, result=dict[str, Any])


COORDINATOR = Interface(
    "coordinator",
    [_m("prompt", PromptArgs)]
    + [
        _m(n)
        for n in (
            "session continue steer follow_up abort abort_retry compact get_state get_messages subscribe tree navigate "
            "label fork fork_messages set_model set_thinking_level new_session switch_session set_session_name "
            "get_session_stats get_last_assistant_text bash get_available_models export_html set_queue_mode set_auto"
        ).split()
    ],
)
_ = Empty
