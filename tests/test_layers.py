"""The package's layers import only downward, and the tests use only public modules.

Read statically (``ast``: every import statement, top-level or inside a function or an
``if TYPE_CHECKING`` block, and every string constant that names a module, such as an actor
entry ``"pi_actors.actors.provider:run_provider"``), so a forbidden dependency fails here
even on a path no other test runs. Each failure names the file, the line and the import.

The layers, low to high (README "Layers"):

- ``runtime`` — the actor runtime; knows nothing of the rest.
- ``ai`` < ``agent`` < ``coding`` — the agent stack; none of it imports the runtime or the
  actors (a tool or a sandbox policy is not a process).
- ``extensions`` — the extension API and loader (user code's view); over the agent stack only.
- ``protocol`` — the typed contracts of the actors: the runtime's Structs over ai/agent types.
- ``actors`` < ``placement`` < ``server`` < ``client`` < ``cli`` — processes, hosting, the public client, the
  command line. ``testing`` (scripted servers, wire formats) may use anything below ``cli``.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "pi_actors"

_AGENT_STACK = {"ai", "agent", "coding"}
_BELOW_ACTORS = {"runtime", "ai", "agent", "coding", "protocol", "extensions"}

#: layer -> the layers its modules may import (its own included).
ALLOWED: dict[str, set[str]] = {
    # pi_actors/__init__.py and modules directly in pi_actors/ (shared constants): anyone
    # may import them, and they import nothing else of the project.
    "": {""},
    "runtime": {"runtime"},
    "ai": {"ai"},
    "agent": {"ai", "agent"},
    "coding": {"ai", "agent", "coding"},
    "protocol": {"runtime", "ai", "agent", "protocol"},
    "extensions": {"ai", "agent", "coding", "extensions"},
    "actors": _BELOW_ACTORS | {"actors"},
    # Where whole sessions run (local processes; Ray later): used by the server and the CLI.
    "placement": _BELOW_ACTORS | {"actors", "placement"},
    "server": _BELOW_ACTORS | {"actors", "placement", "server"},
    "client": _BELOW_ACTORS | {"actors", "placement", "server", "client"},
    "testing": _BELOW_ACTORS | {"actors", "server", "client", "testing"},
    "cli": _BELOW_ACTORS | {"actors", "placement", "server", "client", "testing", "cli"},
}
assert _AGENT_STACK <= ALLOWED.keys()


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _layer(module: str) -> str:
    """``pi_actors.actors.local`` -> ``actors``; ``pi_actors`` and a module directly in it
    (``pi_actors.thinking``: constants every layer shares) -> ``""``, the bottom."""
    parts = module.split(".")
    if len(parts) < 2 or (ROOT / "pi_actors" / f"{parts[1]}.py").is_file():
        return ""
    return parts[1]


def _resolve(importer: str, is_package: bool, node: ast.ImportFrom) -> str:
    """The absolute module an ``ImportFrom`` reads from (relative imports resolved)."""
    if node.level == 0:
        return node.module or ""
    base = importer.split(".")
    if not is_package:
        base.pop()
    if node.level > 1:
        base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _docstrings(tree: ast.Module) -> set[int]:
    """ids of the docstring constants (prose may name any module)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
    return found


def _names_a_module(text: str, *, entry: bool) -> bool:
    """Whether a string names a module to import or run: an entry ``"pkg.mod:func"``, or the
    dotted name of a module file (``"pi_actors.actors._zygote"`` for ``python -m``). A bare
    package name is not counted: that is how loggers are named (``"pi_actors.server"``)."""
    if not text.startswith("pi_actors.") or not text.replace(".", "").replace("_", "").isalnum():
        return False
    return entry or (ROOT / (text.replace(".", "/") + ".py")).is_file()


def project_imports(path: Path) -> list[tuple[int, str, str]]:
    """(line, imported pi_actors module, how it was written) for every import of the
    project in ``path``, and every non-docstring string that is a module path."""
    importer = _module_name(path) if path.is_relative_to(PACKAGE) else path.stem
    is_package = path.name == "__init__.py"
    tree = ast.parse(path.read_text(), filename=str(path))
    docs = _docstrings(tree)
    found: list[tuple[int, str, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "pi_actors":
                    found.append((node.lineno, alias.name, f"import {alias.name}"))
        elif isinstance(node, ast.ImportFrom):
            module = _resolve(importer, is_package, node)
            if module.split(".")[0] != "pi_actors":
                continue
            text = f"from {'.' * node.level}{node.module or ''} import {', '.join(a.name for a in node.names)}"
            if module == "pi_actors":
                # ``from pi_actors import cli`` / ``from .. import runtime``: the names are the layers.
                found += [(node.lineno, f"pi_actors.{alias.name}", text) for alias in node.names]
            else:
                found.append((node.lineno, module, text))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            name, colon, _ = node.value.partition(":")
            if _names_a_module(name, entry=bool(colon)):
                found.append((node.lineno, name, repr(node.value)))
    return found


def _package_modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def layer_violations(paths: list[Path]) -> list[str]:
    problems = []
    for path in paths:
        layer = _layer(_module_name(path))
        allowed = ALLOWED.get(layer)
        if allowed is None:
            problems.append(f"{path.relative_to(ROOT)}: package {layer!r} has no place in the layers (add it to ALLOWED)")
            continue
        for line, module, text in project_imports(path):
            target = _layer(module)
            if target not in allowed | {""}:
                problems.append(f"{path.relative_to(ROOT)}:{line}: {layer or 'pi_actors'} imports {target} ({text})")
    return problems


def test_every_module_imports_only_its_own_layer_and_the_ones_below():
    problems = layer_violations(_package_modules())
    assert not problems, "imports against the layers:\n" + "\n".join(problems)


def test_the_check_names_an_upward_import(tmp_path, monkeypatch):
    # The checker itself: a coding module that imports the runtime, a server module that
    # imports the CLI and a runtime module that names an actor in a string are all reported.
    fake = tmp_path / "pi_actors"
    for package, body in {
        "coding/sandbox/launch.py": "from ...runtime import ChildProcess\n",
        "server/_hosting.py": "def f():\n    from ..cli.main import main\n",
        "runtime/spawn.py": '"""Docstrings may name pi_actors.actors.provider."""\nENTRY = "pi_actors.actors.provider:run_provider"\n',
        "actors/local.py": "from ..runtime import open_peer\nfrom .. import coding\n",
    }.items():
        path = fake / package
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(body)
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    monkeypatch.setattr(sys.modules[__name__], "PACKAGE", fake)
    problems = layer_violations(sorted(fake.rglob("*.py")))
    assert problems == [
        "pi_actors/coding/sandbox/launch.py:1: coding imports runtime (from ...runtime import ChildProcess)",
        "pi_actors/runtime/spawn.py:2: runtime imports actors ('pi_actors.actors.provider:run_provider')",
        "pi_actors/server/_hosting.py:2: server imports cli (from ..cli.main import main)",
    ]


# -- tests use public modules -----------------------------------------------------------------

#: The package each test module tests, by the first word of its name (``test_ai_sse`` -> ai),
#: with the exceptions spelled out. A test may reach into private modules of its own package
#: (a unit test of a parser, the zygote's fork protocol); of any other package it uses only
#: public names.
OWN_PACKAGE_BY_WORD = {
    "runtime": "runtime", "protocol": "runtime", "ai": "ai", "agent": "agent",
    "compaction": "coding", "branch": "coding", "session": "coding", "system": "coding",
    "retry": "coding", "tool": "coding", "sandbox": "coding", "containment": "coding",
    "actors": "actors", "actor": "actors", "provider": "actors", "supervision": "actors", "chaos": "actors",
    "remote": "server", "client": "client", "cli": "cli", "tui": "cli", "scripted": "testing", "startup": "cli",
    "extensions": "extensions", "batch": "cli",
}
OWN_PACKAGE = {
    "test_tool_pool.py": "actors",  # the tool pool actor and its zygote
    "test_tool_zygote.py": "actors",
    "test_session_durability.py": "actors",  # the session store process, killed
    "test_session_lock.py": "cli",  # two pi-actors processes on one session
    "test_sandbox_cli.py": "cli",
    "test_containment_server.py": "server",
    "test_containment_server_limits.py": "server",
    "test_containment_tool_host.py": "cli",  # pi-actors tool-host
    "test_provider_stalls.py": "ai",  # the SDK streams and the retry policy
    "test_provider_google.py": "ai",  # the issue-17 APIs' stream functions and decoders
    "test_provider_mistral.py": "ai",
    "test_provider_azure.py": "ai",
    "test_provider_codex.py": "ai",
    "test_runtime_config.py": "cli",  # the configuration the CLI builds for the actors
    "test_layers.py": "",
    "test_extensions_host.py": "actors",  # the extension-host actor and the coordinator's hooks
    "text_runs.py": "ai",  # support: the providers' text-run parser driven in-process
    "test_provider_request_path.py": "ai",  # the SDK request path of the provider functions
}

#: Private modules a test still imports from another package, each waiting on a branch of
#: issue 14 that changes the module. Remove an entry once that branch is merged.
PENDING: dict[str, str] = {
}


def own_package(path: Path) -> str:
    if path.name in OWN_PACKAGE:
        return OWN_PACKAGE[path.name]
    word = path.stem.split("_")[1] if path.stem.startswith("test_") else ""
    return OWN_PACKAGE_BY_WORD.get(word, "")


def _private_part(module: str) -> bool:
    return any(part.startswith("_") and not part.startswith("__") for part in module.split(".")[1:])


def private_imports(path: Path) -> list[str]:
    """The imports in ``path`` of private modules of packages other than its own."""
    own = own_package(path)
    imported = [(line, module, text) for line, module, text in project_imports(path)]
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        # ``from pi_actors.cli import _client``: a private module imported by name.
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("pi_actors"):
            for alias in node.names:
                if alias.name.startswith("_") and (ROOT / f"{node.module}.{alias.name}".replace(".", "/")).with_suffix(".py").is_file():
                    imported.append((node.lineno, f"{node.module}.{alias.name}", f"from {node.module} import {alias.name}"))
    return [
        f"{path.relative_to(ROOT)}:{line}: {text}"
        for line, module, text in imported
        if _private_part(module) and _layer(module) != own and module not in PENDING
    ]


TEST_FILES = sorted((ROOT / "tests").glob("test_*.py")) + sorted((ROOT / "tests" / "support").glob("*.py"))


@pytest.mark.parametrize("path", TEST_FILES, ids=lambda p: str(p.relative_to(ROOT / "tests")))
def test_tests_import_no_private_module_of_another_package(path):
    problems = private_imports(path)
    assert not problems, "private modules of another package imported by a test (use a public name):\n" + "\n".join(problems)


def test_the_private_module_check_knows_a_tests_own_package(tmp_path, monkeypatch):
    tests = tmp_path / "tests"
    tests.mkdir()
    (tmp_path / "pi_actors" / "cli").mkdir(parents=True)
    (tmp_path / "pi_actors" / "cli" / "_client.py").write_text("")
    (tests / "test_ai_x.py").write_text(
        "from pi_actors.ai.providers._sse import SSEDecoder\n"
        "from pi_actors.runtime._codec import encode_message\n"
        "from pi_actors.cli import _client\n"
    )
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    assert private_imports(tests / "test_ai_x.py") == [
        "tests/test_ai_x.py:2: from pi_actors.runtime._codec import encode_message",
        "tests/test_ai_x.py:3: from pi_actors.cli import _client",
    ]


def test_no_test_module_imports_another():
    # Shared fixtures and helpers live in conftest.py or tests/helpers.py, not in a test file.
    problems = []
    for path in TEST_FILES:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[-1].startswith("test_"):
                problems.append(f"{path.relative_to(ROOT)}:{node.lineno}: from {node.module} import ...")
            elif isinstance(node, ast.Import):
                problems += [f"{path.relative_to(ROOT)}:{node.lineno}: import {a.name}" for a in node.names if a.name.split(".")[-1].startswith("test_")]
    assert not problems, "\n".join(problems)


def test_importing_the_actors_package_loads_neither_trio_nor_the_runtime():
    # Every actor process imports pi_actors.actors first; the tool zygote
    # (``python -m pi_actors.actors._zygote``) must be able to answer its pool before it
    # has imported trio, so the package's public names resolve lazily.
    code = "import sys, pi_actors.actors; print(sorted(m for m in ('trio', 'pi_actors.runtime') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60, check=True)
    assert out.stdout.strip() == "[]"
