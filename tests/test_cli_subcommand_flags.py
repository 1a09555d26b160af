"""A mistyped flag given to any subcommand (issue 18, item 9): one line naming it, with the
option that was probably meant, and exit code 1 — never argparse's whole usage page.

In-process calls of the CLI's ``main``: the parser decides before any actor or socket exists.
"""

from __future__ import annotations

import io
import sys

import pytest

from pi_actors.cli import main as cli_main


def _run(argv: list[str], capsys, monkeypatch) -> tuple[int, str, str]:
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    with pytest.raises(SystemExit) as exit_:
        cli_main.main(argv)
    out, err = capsys.readouterr()
    return int(exit_.value.code or 0), out, err


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (["serve", "--lisen", "127.0.0.1:0"], "unknown option --lisen; did you mean --listen?"),
        (["serve", "--max-sesions=3"], "unknown option --max-sesions; did you mean --max-sessions?"),
        (["serve", "token", "add", "--roel", "admin", "bob"], "unknown option --roel; did you mean --role?"),
        (["attach", "ws://127.0.0.1:1/", "--sesion", "abc", "hello"], "unknown option --sesion; did you mean --session?"),
        # The unknown flag is named before the required ones it hides ("--connect is required").
        (["tool-host", "--conect", "ws://127.0.0.1:1/", "--name", "h", "--workspace", "."],
         "unknown option --conect; did you mean --connect?"),
        (["tool-host", "--name", "h", "--worksapce", "."], "unknown option --worksapce; did you mean --workspace?"),
        (["install", "--locl", "pkg"], "unknown option --locl; did you mean --local?"),
        (["list", "--zzzzzz"], "unknown option --zzzzzz (see pi-actors list --help)"),
    ],
)  # fmt: skip
def test_a_wrong_flag_to_a_subcommand_is_one_line_with_what_was_meant(argv, line, capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("PI_ACTORS_DIR", str(tmp_path / "conf"))
    code, out, err = _run(argv, capsys, monkeypatch)
    assert (code, out, err) == (1, "", f"Error: {line}\n")
    assert not (tmp_path / "conf" / "server").exists()  # nothing was done


def test_other_subcommand_mistakes_are_one_line_too(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("PI_ACTORS_DIR", str(tmp_path / "conf"))
    for argv, words in [
        (["tool-host", "--name", "h"], "the following arguments are required: --connect, --workspace"),
        (["serve", "--max-sessions", "many"], "argument --max-sessions: invalid int value: 'many'"),
        (["serve", "--sandbox", "sometimes"], "argument --sandbox: invalid choice: 'sometimes'"),
        (["serve", "token", "ad", "bob"], "invalid choice: 'ad'"),
    ]:
        code, out, err = _run(argv, capsys, monkeypatch)
        assert (code, out) == (1, ""), argv
        assert err.startswith("Error: ") and words in err and len(err.splitlines()) == 1, err
        assert "usage:" not in err
