"""A session as one self-contained HTML file (pi's ``/export`` and ``--export``).

The implementation lives in the :mod:`pi_actors.coding.export` package; this module keeps
the import path the CLI and the coordinator use.
"""

from __future__ import annotations

from .export import default_export_name, export_html, render_html

__all__ = ["default_export_name", "export_html", "render_html"]
