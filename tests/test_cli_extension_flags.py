"""Extension flags on the command line, in-process: which tokens are an extension's flag
and its value, and hostile command lines."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from pi_actors.cli._extensions import FlagError, take_extension_flags
from pi_actors.extensions import RegisteredFlag


def _flags() -> dict:
    return {"plan": RegisteredFlag("plan", "", "boolean", False, "ext.py"), "mode-x": RegisteredFlag("mode-x", "", "string", None, "ext.py")}


def test_extension_flags_are_taken_out_of_the_command_line_and_pi_actors_own_options_never_are():
    own = ["--model", "-p", "--plan-own"]
    rest, values = take_extension_flags(["--plan", "-p", "--mode-x", "fast", "hello", "--model", "m"], own, _flags())
    assert (rest, values) == (["-p", "hello", "--model", "m"], {"plan": True, "mode-x": "fast"})
    rest, values = take_extension_flags(["--plan=false", "--mode-x=a=b", "--", "--plan"], own, _flags())
    assert (rest, values) == (["--", "--plan"], {"plan": False, "mode-x": "a=b"})
    try:
        take_extension_flags(["--mode-x", "--plan"], own, _flags())
    except FlagError as exc:
        assert str(exc) == "extension flag --mode-x needs a value (registered by ext.py)"
    else:
        raise AssertionError("a string flag without its value was accepted")


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(["--plan", "--mode-x", "--plan=1", "--mode-x=", "--", "-p", "--model", "x"]), st.text(max_size=8)), max_size=12))
def test_hostile_command_lines_split_into_a_subsequence_or_fail_in_one_line(argv):
    try:
        rest, values = take_extension_flags(argv, ["--model", "-p"], _flags())
    except FlagError as exc:
        assert "\n" not in str(exc)
        return
    left = iter(argv)
    assert all(any(token == other for other in left) for token in rest)  # rest keeps argv's order
    assert set(values) <= {"plan", "mode-x"} and rest.count("--model") == argv.count("--model")
