"""The static checks the project holds itself to, run as tests so a regression shows up in the
suite (and so in CI, which runs the README's test command): ruff's rule set and mypy clean, and
no function of the package, the benchmarks or the tests above the complexity limit configured
for ruff (C901, ``[tool.ruff.lint.mccabe]`` in pyproject.toml)."""

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


def test_ruff_finds_nothing_in_the_package_the_tests_the_benchmarks_and_the_examples():
    # The rule set is [tool.ruff.lint] in pyproject.toml (pyflakes, pycodestyle, import order,
    # bugbear, async misuse, pyupgrade, complexity).
    done = subprocess.run(
        [str(RUFF), "check", "--output-format", "concise", "pi_actors", "tests", "benchmarks", "examples"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_mypy_finds_no_type_error_in_the_package(tmp_path):
    # [tool.mypy] in pyproject.toml: strict for runtime, protocol and actors; the rest checked
    # with check_untyped_defs. A fresh cache keeps the run independent of earlier ones.
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--cache-dir", str(tmp_path / "cache")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
