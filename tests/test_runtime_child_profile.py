"""``PI_ACTORS_PROFILE_DIR``: an actor started by ``pi_actors.runtime.child`` profiles its
event loop and writes ``<pid>-<name>.prof`` into that directory when its entry ends — also
when the entry raised — and a directory it cannot write to is reported without changing how
the actor ends. (Actors run under ``python -I``, so a profiler in a ``sitecustomize`` on
``PYTHONPATH`` never sees them; ``benchmarks.profile`` relies on this.)
"""

from __future__ import annotations

import pstats
import textwrap

from support.actor_child import run_actor_child

ENTRY = textwrap.dedent('''
    def busy_work():
        return sum(i * i for i in range(20000))

    async def ends_well(links, config):
        busy_work()
        await links["peer"].send_all(b"done")

    async def fails(links, config):
        busy_work()
        raise RuntimeError("the entry broke")
''')


def _functions(path) -> set[str]:
    return {name for (_file, _line, name) in pstats.Stats(str(path)).stats}


def test_an_actor_asked_for_a_profile_writes_one_named_after_it_with_its_entry_in_it(tmp_path):
    out = tmp_path / "profiles"
    out.mkdir()
    done, received = run_actor_child(tmp_path, "profiled_entry", ENTRY, "ends_well",
                                     extra_env={"PI_ACTORS_PROFILE_DIR": str(out)})
    assert done.returncode == 0, done.stderr.decode()
    assert received == b"done"
    files = list(out.iterdir())
    assert [f.name.split("-", 1)[1] for f in files] == ["t.prof"]
    assert files[0].name.split("-", 1)[0].isdigit()  # the actor's pid
    assert {"ends_well", "busy_work"} <= _functions(files[0])


def test_an_entry_that_raises_still_leaves_its_profile_and_exits_with_status_1(tmp_path):
    out = tmp_path / "profiles"
    out.mkdir()
    done, _ = run_actor_child(tmp_path, "profiled_entry", ENTRY, "fails",
                              extra_env={"PI_ACTORS_PROFILE_DIR": str(out)})
    assert done.returncode == 1
    assert b"RuntimeError: the entry broke" in done.stderr
    (profile,) = out.iterdir()
    assert "fails" in _functions(profile)


def test_a_profile_directory_that_cannot_be_written_is_reported_and_the_actor_ends_normally(tmp_path):
    missing = tmp_path / "no-such-dir"
    done, received = run_actor_child(tmp_path, "profiled_entry", ENTRY, "ends_well",
                                     extra_env={"PI_ACTORS_PROFILE_DIR": str(missing)})
    assert done.returncode == 0
    assert received == b"done"
    assert f"t: cannot write its profile {missing}/".encode() in done.stderr
    assert b"Traceback" not in done.stderr
    assert not missing.exists()


def test_without_the_variable_no_profile_is_written(tmp_path):
    done, _ = run_actor_child(tmp_path, "profiled_entry", ENTRY, "ends_well")
    assert done.returncode == 0
    assert not list(tmp_path.glob("**/*.prof"))
