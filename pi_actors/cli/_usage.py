"""How the command line talks about itself: the argument parser's errors and the help text.

* :class:`CliParser` — an ``argparse.ArgumentParser`` whose mistakes are one line on stderr
  (``Error: unknown option --modle; did you mean --model?``) and exit code 1, instead of the
  whole usage and exit code 2: a user who mistyped one flag needs the flag, not the page.
* :class:`UsageError` — a mistake on the command line: ``main`` prints it as one line
  (``Error: ...``) and exits with code 1.
* :func:`help_epilog` — the part of ``--help`` after the options: the subcommands (from the
  one table the caller passes, so a subcommand added there is listed), the configuration
  directory, where sessions are saved and the environment variables that matter.

Only the standard library is imported (``--help`` must stay fast).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import NoReturn

__all__ = ["CliParser", "UsageError", "help_epilog", "suggest"]


class UsageError(Exception):
    """A mistake on the command line, already worded for the user (one line, exit code 1)."""


def suggest(word: str, candidates: Iterable[str]) -> str | None:
    """The candidate ``word`` is most likely a typo of, or None when none is close: the fewest
    edits (a swap of two neighbouring letters is one edit, so ``--modle`` is ``--model``),
    then the nearest length, then the first given. At most a third of the word may differ."""
    best: tuple[int, int, int] | None = None
    chosen = None
    for index, candidate in enumerate(candidates):
        rank = (_edits(word, candidate), abs(len(word) - len(candidate)), index)
        if rank[0] <= len(word) // 3 and (best is None or rank < best):
            best, chosen = rank, candidate
    return chosen


def _edits(a: str, b: str) -> int:
    """Edit distance between ``a`` and ``b``: insertions, deletions, substitutions and swaps
    of adjacent characters each count one (the optimal string alignment distance)."""
    previous: list[int] = []
    row = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        earlier, previous, row = previous, row, [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cost = 0 if a[i - 1] == b[j - 1] else 1
            row[j] = min(previous[j] + 1, row[j - 1] + 1, previous[j - 1] + cost)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                row[j] = min(row[j], earlier[j - 2] + 1)
    return row[len(b)]


class CliParser(argparse.ArgumentParser):
    """An argument parser for people: an unknown option or a bad value is reported as one
    line naming it (with the closest known option when there is one) and exit code 1.

    ``parse_args`` and ``parse_intermixed_args`` refuse every unknown option (``-x``,
    ``--xyz``, ``--xyz=1``); anything else that does not fit goes through ``error`` as
    argparse words it, on one line. An unknown option is named before any other complaint
    (``tool-host --conect URL`` is "did you mean --connect", not "--connect is required")."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        kwargs.setdefault("formatter_class", argparse.RawDescriptionHelpFormatter)
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self._given: list[str] = []
        self._depth = 0

    def option_strings(self) -> list[str]:
        """Every option this parser knows, long and short, and those of its subcommands
        (an unknown one is left over by the subcommand and reported here)."""
        found = [s for action in self._actions for s in action.option_strings]
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction):
                for parser in action.choices.values():
                    found += [s for s in parser.option_strings() if s not in found]
        return found

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        return self._remembering(super().parse_known_args, args, namespace)

    def parse_known_intermixed_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        return self._remembering(super().parse_known_intermixed_args, args, namespace)

    def _remembering(
        self, parse: Callable[..., tuple[argparse.Namespace, list[str]]],
        args: Sequence[str] | None, namespace: argparse.Namespace | None,
    ) -> tuple[argparse.Namespace, list[str]]:
        """Run ``parse``, keeping the outermost call's arguments for :meth:`error`."""
        if self._depth == 0:
            self._given = list(sys.argv[1:] if args is None else args)
        self._depth += 1
        try:
            return parse(args, namespace)
        finally:
            self._depth -= 1

    def parse_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> argparse.Namespace:
        parsed, extras = self.parse_known_args(args, namespace)
        return self._refuse_extras(parsed, extras)

    def parse_intermixed_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> argparse.Namespace:
        parsed, extras = self.parse_known_intermixed_args(args, namespace)
        return self._refuse_extras(parsed, extras)

    def _refuse_extras(self, parsed: argparse.Namespace, extras: list[str]) -> argparse.Namespace:
        for extra in extras:
            if extra.startswith("-") and extra != "-":
                self.unknown_option(extra)
        if extras:
            self.error(f"unexpected argument {extras[0]!r}")
        return parsed

    def unknown_option(self, given: str) -> NoReturn:
        """Refuse ``given`` (``--name`` or ``--name=value``), suggesting the closest option."""
        name = given.split("=", 1)[0]
        hint = suggest(name, self.option_strings())
        tail = f"; did you mean {hint}?" if hint else f" (see {self.prog} --help)"
        self.exit_with(f"unknown option {name}{tail}")

    def first_unknown_option(self, given: Sequence[str]) -> str | None:
        """The first word of ``given`` that looks like an option this parser does not know,
        or None. A long option may be abbreviated (argparse accepts a unique prefix); a
        short one may carry its value (``-mfoo``); a negative number, a word with a space
        and anything after ``--`` are values. A parser with subcommands answers None: the words after the
        subcommand are its parser's to judge."""
        if self._subparsers is not None:
            return None
        known = set(self.option_strings())
        long_ = [s for s in known if s.startswith("--")]
        for word in given:
            if word == "--":
                return None
            if not word.startswith("-") or word == "-" or word[1:2].isdigit() or word[1:2] == "." or " " in word:
                continue  # a value, as argparse reads it (a negative number, a sentence)
            name = word.split("=", 1)[0]
            if name.startswith("--"):
                if name in known or (self.allow_abbrev and any(s.startswith(name) for s in long_)):
                    continue
            elif word[:2] in known:
                continue
            return word
        return None

    def error(self, message: str) -> NoReturn:
        """argparse's complaint (a bad value lists the valid ones), as one line; an unknown
        option among the arguments is reported instead, being the likelier mistake."""
        unknown = self.first_unknown_option(self._given)
        if unknown is not None:
            self.unknown_option(unknown)
        self.exit_with(message.replace("\n", " "))

    def exit_with(self, message: str) -> NoReturn:
        print(f"Error: {message}", file=sys.stderr)
        raise SystemExit(1)


def help_epilog(
    subcommands: Iterable[tuple[str, str]], agent_dir: str, key_variables: Sequence[tuple[str, str]]
) -> str:
    """The text after the options in ``pi-actors --help``.

    ``subcommands``: (name, one-line summary) pairs, in the order to show them;
    ``agent_dir``: the configuration directory as this process resolves it;
    ``key_variables``: (variable, what it does) for the API keys of the built-in providers."""
    rows = list(subcommands)
    width = max((len(name) for name, _ in rows), default=0)
    lines = ["commands:"]
    lines += [f"  pi-actors {name:<{width}}  {summary}" for name, summary in rows]
    lines.append(f"  pi-actors {'<command>':<{width}}  --help shows the options of a command")
    home = os.path.expanduser("~")
    shown = "~" + agent_dir[len(home):] if agent_dir.startswith(home + os.sep) else agent_dir
    lines += [
        "",
        f"configuration ({shown}; set PI_ACTORS_DIR to move it):",
        "  models.json      custom providers and models (pi's format)",
        "  settings.json    settings; <project>/.pi-actors/settings.json overrides them",
        "",
        "sessions:",
        f"  saved in {shown}/sessions/--<working directory>--/ as JSON lines, one file per",
        "  session; --session-dir DIR puts them elsewhere, --no-session saves nothing",
        "",
        "environment variables:",
    ]
    env = list(key_variables) + [
        ("PI_ACTORS_DIR", "configuration directory (default ~/.pi-actors)"),
        ("PI_ACTORS_PLAIN", "1: interactive mode uses a plain line loop, not the TUI"),
    ]
    width = max(len(name) for name, _ in env)
    lines += [f"  {name:<{width}}  {what}" for name, what in env]
    return "\n".join(lines)
