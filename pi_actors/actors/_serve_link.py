"""Serving the coordinator's link, as an actor that may be a supervisor's warm spare.

``await serve_coordinator_link(link, role=..., handler=..., standby=...)`` answers the
coordinator's hello on ``link``, serves its calls with ``handler`` and returns when the link
closes. A standby (``standby=True``: a spare started before it is needed) waits for that
hello as long as it takes, and a spare closed unused just returns; an ordinary actor waits
up to :data:`SIBLING_START` and a failed handshake raises ``ConnectionLost``.

Why not the protocol's 5 s handshake deadline: the coordinator is a sibling started at the
same moment, and says hello only once it has imported its whole stack — on a busy host that
takes longer than 5 s, and the run failed with "connection broke during the handshake". A
coordinator that dies closes the link (the wait ends at once), and one that hangs is killed
by its supervisor after its own start timeout (60 s by default), so waiting as long is safe.
"""

from __future__ import annotations

import math
from typing import Any

from ..runtime import ConnectionLost, Handler, open_peer

__all__ = ["serve_coordinator_link", "SIBLING_START"]

#: How long an ordinary actor waits for the coordinator's hello (the supervision policy's
#: default ``start_timeout``: a starting sibling may take that long).
SIBLING_START = 60.0


async def serve_coordinator_link(link: Any, *, role: str, handler: Handler, standby: bool) -> None:
    # A spare waits for its hello as long as it takes; others as long as a sibling may start.
    patience: dict[str, Any] = {"handshake_timeout": math.inf if standby else SIBLING_START}
    try:
        async with open_peer(link, side="server", role=role, name=role, handler=handler, **patience) as peer:
            await peer.closed_event.wait()
    except ConnectionLost:
        if not standby:
            raise
