"""examples/two_actors.py: the runtime used on its own to build another actor system — two
actors with typed methods, run as tasks and as real child processes, give the same answer,
and a mistyped argument is refused naming the field."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "two_actors.py"


def run_example(*args: str) -> str:
    done = subprocess.run([sys.executable, str(EXAMPLE), *args], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.mark.parametrize("placement", ["tasks", "processes"])
def test_two_typed_actors_answer_the_same_as_tasks_and_as_processes(placement):
    assert run_example(placement) == f"{placement}: total=10 ticks=4"


@pytest.mark.parametrize("placement", ["tasks", "processes"])
def test_a_mistyped_argument_to_an_example_actor_is_refused_naming_the_field(placement):
    out = run_example(placement, "--bad")
    assert out.startswith("refused: invalid_request: summarize:") and "$.numbers[1]" in out
