"""The application protocol: every method of every actor, declared once as msgspec Structs.

One module per actor — ``coordinator``, ``server``, ``pool`` (tool pool and tool workers),
``store`` (session store), ``provider`` — each exporting an ``Interface`` (``COORDINATOR``,
``SERVER``, ``POOL``, ``STORE``, ``PROVIDER``) built from ``Method`` declarations
(``pi_actors.runtime``). Handlers implement them with ``@implements``; callers use
``call_method``/``open_method``. ``proto/schema.cddl``, the method tables of
``proto/PROTOCOL.md`` and the golden vectors are checked against these modules by
``tests/test_protocol_methods.py``.

Schema evolution: a new field gets a default; nothing changes type; receivers ignore unknown
keys. Layering: this package imports ``runtime``, ``ai`` and ``agent`` types only.
"""
