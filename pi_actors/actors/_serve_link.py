"""Serving the coordinator's link, as an actor that may be a supervisor's warm spare.

``await serve_coordinator_link(link, role=..., handler=..., standby=...)`` answers the
coordinator's hello on ``link``, serves its calls with ``handler`` and returns when the link
closes. A standby (``standby=True``: a spare started before it is needed) waits for that
hello as long as it takes, and a spare closed unused just returns; an ordinary actor waits
``SIBLING_HELLO_WAIT`` (60 s, as the coordinator waits for it), and a failed handshake raises
``ConnectionLost``.
"""

from __future__ import annotations

import math
from typing import Any

from ..runtime import ConnectionLost, Handler, open_peer

__all__ = ["serve_coordinator_link", "SIBLING_HELLO_WAIT"]

#: How long an actor waits for its coordinator's hello (the coordinator's ``_relink._HELLO_WAIT``).
SIBLING_HELLO_WAIT = 60.0


async def serve_coordinator_link(link: Any, *, role: str, handler: Handler, standby: bool) -> None:
    # A spare waits for its hello as long as it takes; others wait as long as the coordinator
    # waits for theirs (a sibling starting on a busy machine, not a stranger: the protocol's
    # 5 s guards servers against strangers).
    patience: dict[str, Any] = {"handshake_timeout": math.inf if standby else SIBLING_HELLO_WAIT}
    try:
        async with open_peer(link, side="server", role=role, name=role, handler=handler, **patience) as peer:
            await peer.closed_event.wait()
    except ConnectionLost:
        if not standby:
            raise
