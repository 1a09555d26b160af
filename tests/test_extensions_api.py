"""The extension API and loader in-process: handler chaining, load failures, discovery,
hostile specs."""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pi_actors.extensions import Extensions, discover_extension_specs, load_specs
from pi_actors.extensions._api import _Registrations


def _ext(tmp_path: Path, name: str, body: str) -> str:
    path = tmp_path / f"{name}.py"
    path.write_text(body)
    return str(path)


async def test_handlers_run_in_load_order_each_seeing_the_last_ones_change_and_a_raising_one_is_reported(tmp_path):
    first = _ext(tmp_path, "a", "def register(pi):\n    pi.on('input', lambda e, ctx: {'action': 'transform', 'text': e['text'] + ' one'})\n")
    broken = _ext(tmp_path, "b", "def register(pi):\n    def h(e, ctx):\n        raise KeyError('nope')\n    pi.on('input', h)\n")
    third = _ext(tmp_path, "c", "async def register_later(e, ctx):\n    return {'action': 'transform', 'text': e['text'] + ' three'}\n"
                 "def register(pi):\n    pi.on('input', register_later)\n")  # fmt: skip
    extensions = Extensions(str(tmp_path))
    extensions.load([first, broken, third])
    result, errors = await extensions.emit("input", {"text": "zero"})
    assert result == {"action": "transform", "text": "zero one three"}
    assert [(e.extension, e.event, e.error) for e in errors] == [(broken, "input", "KeyError: 'nope'")]


async def test_a_blocking_tool_call_handler_ends_the_chain():
    registry = _Registrations()
    extensions = Extensions("/")
    extensions.registry = registry
    calls = []
    registry.handlers += [
        ("tool_call", lambda e, ctx: {"block": True, "reason": "no"}, "gate"),
        ("tool_call", lambda e, ctx: calls.append(e), "later"),
    ]
    result, errors = await extensions.emit("tool_call", {"toolName": "bash", "input": {}})
    assert result == {"block": True, "reason": "no"} and errors == [] and calls == []


def test_an_extension_that_fails_to_load_is_skipped_with_what_it_registered_and_the_others_load(tmp_path):
    half = _ext(tmp_path, "half", "def register(pi):\n    pi.register_tool('t1', execute=lambda *a: 'x')\n    pi.on('nonsense', print)\n")
    good = _ext(tmp_path, "good", "def register(pi):\n    pi.register_tool('t2', execute=lambda *a: 'y')\n")
    dup = _ext(tmp_path, "dup", "def register(pi):\n    pi.register_tool('t2', execute=lambda *a: 'z')\n")
    syntax = _ext(tmp_path, "syntax", "def register(pi) oops\n")
    registry = _Registrations()
    loaded, failed = load_specs([half, good, dup, syntax, str(tmp_path / "missing.py"), "module:no_such_module_xyz"], registry)
    assert loaded == [good]
    assert sorted(registry.tools) == ["t2"] and registry.tools["t2"].extension == good
    errors = dict(failed)
    assert errors[half].startswith("register failed: ValueError: pi.on: unknown event 'nonsense' (events: session_start,")
    assert errors[dup] == f"register failed: ValueError: tool 't2' is already registered by {good}"
    assert errors[syntax].startswith("SyntaxError")
    assert errors[str(tmp_path / "missing.py")] == "no such file or directory"
    assert errors["module:no_such_module_xyz"].startswith("cannot import no_such_module_xyz: ModuleNotFoundError")
    assert all("\n" not in e for e in errors.values())


def test_extensions_are_found_in_the_user_and_project_directories_unless_disabled(tmp_path):
    home, cwd = tmp_path / "home", tmp_path / "proj"
    (cwd / ".pi-actors" / "extensions" / "pkg").mkdir(parents=True)
    (cwd / ".pi-actors" / "extensions" / "pkg" / "__init__.py").write_text("")
    (cwd / ".pi-actors" / "extensions" / "notes.txt").write_text("")
    home.mkdir()
    (home / "mine.py").write_text("")
    found = discover_extension_specs(str(cwd), ["x.py"], home_dir=str(home), extra=["module:pkg_ext"])
    assert found == [str(cwd / "x.py"), str(home / "mine.py"), str(cwd / ".pi-actors" / "extensions" / "pkg"), "module:pkg_ext"]
    assert discover_extension_specs(str(cwd), ["x.py"], no_extensions=True, home_dir=str(home)) == [str(cwd / "x.py")]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.text(max_size=40), max_size=4))
def test_hostile_specs_are_load_errors_never_exceptions(tmp_path, specs):
    registry = _Registrations()
    loaded, failed = load_specs([s for s in specs if "\x00" not in s and not s.strip().startswith(("/", "."))], registry)
    assert all(isinstance(error, str) and "\n" not in error for _, error in failed)
    assert registry.tools == {}




EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "extensions"


async def test_the_bundled_examples_load_and_the_custom_compaction_lists_the_users_requests():
    extensions = Extensions("/")
    extensions.load([str(EXAMPLES)])
    assert extensions.load_errors == []
    assert sorted(p.rsplit("/", 1)[1] for p in extensions.loaded) == [
        "custom_compaction.py", "hello_tool.py", "permission_gate.py", "status_line.py"
    ]
    messages = [{"role": "user", "content": "fix the bug"}, {"role": "assistant", "content": []},
                {"role": "user", "content": [{"type": "text", "text": "and add a test"}]}]  # fmt: skip
    result, errors = await extensions.emit("session_before_compact", {"messagesToSummarize": messages, "customInstructions": None})
    assert errors == []
    assert result == {"compaction": {"summary": "The user asked, in order:\n- fix the bug\n- and add a test"}}
