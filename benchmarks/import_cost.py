"""The import cost of each provider module, and proof that no SDK is on the start-up path.

``python -m benchmarks.import_cost [--runs N]`` prints one line per API of
``pi_actors.ai.registry.BUILTIN_PROVIDER_MODULES``: the median wall time of importing its
provider module in a fresh interpreter (after ``pi_actors.ai``, which every process that
streams has already imported), the modules that import adds, and the SDK's top-level packages
among them. Then one line for the CLI's start-up (``pi_actors.cli.main`` imported) naming any
SDK package it loaded: there should be none, every SDK being imported by the provider process
at its first use (the tests check the same in tests/test_startup_imports.py).

A module whose SDK is not installed (an optional extra) is reported as such, not timed.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import textwrap
from pathlib import Path

_ROOT = str(Path(__file__).resolve().parent.parent)
SDK_PACKAGES = ("anthropic", "openai", "google", "mistralai", "httpx2", "httpx", "pydantic")

_PROBE = textwrap.dedent("""
    import json, sys, time
    import pi_actors.ai
    before = set(sys.modules)
    t0 = time.perf_counter()
    try:
        __import__(sys.argv[1])
    except ImportError as exc:
        print(json.dumps({"missing": str(exc)}))
        raise SystemExit(0)
    seconds = time.perf_counter() - t0
    added = set(sys.modules) - before
    print(json.dumps({"seconds": seconds, "modules": len(added),
                      "packages": sorted({m.split(".")[0] for m in added})}))
""")

_STARTUP = textwrap.dedent("""
    import json, sys
    import pi_actors.cli.main
    print(json.dumps(sorted({m.split(".")[0] for m in sys.modules})))
""")


def _probe(code: str, *args: str) -> object:
    out = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=_ROOT,
                         timeout=120, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def measure(runs: int) -> list[str]:
    from pi_actors.ai.registry import BUILTIN_PROVIDER_MODULES

    lines = []
    for api, module in BUILTIN_PROVIDER_MODULES.items():
        samples = [_probe(_PROBE, module) for _ in range(runs)]
        first = samples[0]
        assert isinstance(first, dict)
        if "missing" in first:
            lines.append(f"{api:24} not installed: {first['missing']}")
            continue
        wall = statistics.median(s["seconds"] for s in samples if isinstance(s, dict))
        sdks = [p for p in first["packages"] if p in SDK_PACKAGES]
        lines.append(f"{api:24} import {wall * 1000:7.0f} ms  {first['modules']:5} modules  SDK: {', '.join(sdks) or '-'}")
    loaded = _probe(_STARTUP)
    assert isinstance(loaded, list)
    on_path = [p for p in loaded if p in SDK_PACKAGES]
    lines.append(f"{'cli start-up':24} SDK packages loaded: {', '.join(on_path) or 'none'}")
    return lines


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.import_cost")
    parser.add_argument("--runs", type=int, default=3, help="fresh interpreters per module (median)")
    args = parser.parse_args(argv)
    for line in measure(max(1, args.runs)):
        print(line)


if __name__ == "__main__":
    main()
