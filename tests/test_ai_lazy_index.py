"""The provider SDKs import without building their whole type index (ai.providers._lazy_index).

Each check runs in a fresh isolated interpreter: the deferral applies to packages imported
after it is installed, and this test process has imported the SDKs long ago."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path


def _run(code: str, *, path: Path | None = None) -> str:
    prelude = f"import sys; sys.path.insert(0, {str(path)!r})\n" if path else ""
    out = subprocess.run(
        [sys.executable, "-I", "-c", prelude + textwrap.dedent(code)], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_openai_provider_warms_up_without_building_the_unused_types() -> None:
    out = _run(
        """
        import sys, trio
        import pi_actors.ai.providers.openai_completions as provider
        trio.run(provider.warm_up)
        print(sorted(m for m in ("openai.types.batch", "openai.types.responses.response", "openai.types.chat.chat_completion_chunk") if m in sys.modules))
        """
    )
    # Only what the chat-completions path imports by submodule is there; the index of
    # openai.types (batches, the responses API...) was never run.
    assert out == "['openai.types.chat.chat_completion_chunk']"


def test_every_name_of_a_deferred_sdk_index_is_still_there() -> None:
    out = _run(
        """
        import pi_actors.ai.providers  # installs the deferral
        import openai
        from openai.types import Batch
        from openai.types.responses import Response
        import openai.types as t
        ns = {}
        exec("from openai.types.chat import *", ns)
        print(Batch.__name__, Response.__name__, t.Batch is Batch, "ChatCompletionChunk" in ns, openai.types is t)
        """
    )
    assert out == "Batch Response True True True"


def _package(tmp_path: Path) -> Path:
    pkg = tmp_path / "sdk" / "types"
    (pkg / "sub").mkdir(parents=True)
    (tmp_path / "sdk" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text(
        "import builtins\n"
        "builtins.INDEX_RUNS = getattr(builtins, 'INDEX_RUNS', 0) + 1\n"
        "from .leaf import Leaf as Leaf\n"
        "from . import sub\n"
        "CONSTANT = 42\n"
        "def __getattr__(name):\n"
        "    if name == 'computed':\n"
        "        return 'from the package'\n"
        "    raise AttributeError(name)\n"
    )
    (pkg / "leaf.py").write_text("class Leaf:\n    pass\n")
    (pkg / "sub" / "__init__.py").write_text("from .deep import Deep as Deep\n")
    (pkg / "sub" / "deep.py").write_text("class Deep:\n    pass\n")
    return tmp_path


def test_a_deferred_index_runs_once_on_first_lookup_and_keeps_its_own_getattr(tmp_path: Path) -> None:
    root = _package(tmp_path)
    out = _run(
        """
        import builtins
        from pi_actors.ai.providers._lazy_index import defer_indexes
        defer_indexes(["sdk.types"])
        from sdk.types.sub.deep import Deep           # a submodule: no index runs
        before = getattr(builtins, "INDEX_RUNS", 0)
        import sdk.types as t
        print(before, t.CONSTANT, t.computed, t.Leaf.__name__, builtins.INDEX_RUNS)
        try:
            t.missing
        except AttributeError as exc:
            print("AttributeError", exc)
        """,
        path=root,
    )
    assert out.splitlines() == ["0 42 from the package Leaf 1", "AttributeError missing"]


def test_threads_asking_a_deferred_index_at_once_all_get_the_name(tmp_path: Path) -> None:
    root = _package(tmp_path)
    (root / "sdk" / "types" / "__init__.py").write_text(
        "import builtins\n"
        "builtins.INDEX_RUNS = getattr(builtins, 'INDEX_RUNS', 0) + 1\n"
        "CONSTANT = 42\n"
    )
    out = _run(
        """
        import builtins, threading
        from pi_actors.ai.providers._lazy_index import defer_indexes
        defer_indexes(["sdk.types"])
        import sdk.types.leaf
        import sdk.types as t
        got = []
        threads = [threading.Thread(target=lambda: got.append(t.CONSTANT)) for _ in range(8)]
        for th in threads: th.start()
        for th in threads: th.join()
        print(got, builtins.INDEX_RUNS)
        """,
        path=root,
    )
    assert out == f"{[42] * 8} 1"
