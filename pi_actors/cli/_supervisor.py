"""Where the CLI and the server have always found the local placement; it now lives in
``pi_actors.actors.local`` (public API of the actors layer), re-exported here."""

from __future__ import annotations

from ..actors.local import CoordinatorLink, open_local_runtime, run_coordinator_with_store, secret_env_names

__all__ = ["CoordinatorLink", "open_local_runtime", "run_coordinator_with_store", "secret_env_names"]
