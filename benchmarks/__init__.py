"""Benchmarks for pi-actors: side by side with pi, and micro-benchmarks of the runtime.

Every figure is printed next to a baseline measured in the same run (pi itself for the
scenarios; a plain-library equivalent for the micro-benchmarks). Nothing here is a test:
``pytest`` never collects this package.

Entry points:

* ``python -m benchmarks`` — everything (``--quick`` for a short run, ``--help``);
* ``python -m benchmarks.server`` — the scenario-aware scripted LLM server the runner starts.

See ``benchmarks/README.md``.
"""
