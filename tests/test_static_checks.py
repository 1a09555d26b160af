"""The static checks the project holds itself to, run as tests so a regression shows up in the
suite: no function of the package, the benchmarks or the tests above the complexity limit
configured for ruff (C901, ``[tool.ruff.lint.mccabe]`` in pyproject.toml)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RUFF = Path(sys.executable).with_name("ruff")


def test_no_function_is_more_complex_than_the_configured_limit():
    done = subprocess.run(
        [str(RUFF), "check", "--select", "C901", "--output-format", "concise", "pi_actors", "benchmarks", "tests"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
