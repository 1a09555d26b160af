"""Serving the coordinator's link, as an actor that may be a supervisor's warm spare.

``await serve_coordinator_link(link, role=..., handler=..., standby=...)`` answers the
coordinator's hello on ``link``, serves its calls with ``handler`` and returns when the link
closes. A standby (``standby=True``: a spare started before it is needed) waits for that
hello as long as it takes, and a spare closed unused just returns; an ordinary actor waits
``SIBLING_HANDSHAKE_TIMEOUT`` for its coordinator, a sibling that may still be starting, and a
failed handshake raises ``ConnectionLost``.
"""

from __future__ import annotations

import math
from typing import Any

from ..runtime import ConnectionLost, Handler, open_peer
from ..runtime.protocol import SIBLING_HANDSHAKE_TIMEOUT

__all__ = ["serve_coordinator_link"]


async def serve_coordinator_link(link: Any, *, role: str, handler: Handler, standby: bool) -> None:
    # A spare waits for its hello as long as it takes; others as long as a sibling may take to start.
    patience = math.inf if standby else SIBLING_HANDSHAKE_TIMEOUT
    try:
        async with open_peer(link, side="server", role=role, name=role, handler=handler, handshake_timeout=patience) as peer:
            await peer.closed_event.wait()
    except ConnectionLost:
        if not standby:
            raise
