"""``pi-actors install | remove | update | list``: packages of extensions, skills, prompt
templates and themes (pi's packages, in Python).

Sources (as pi's, with PyPI for npm):

- a local path (``/abs``, ``./rel``, ``~/x``, or an existing directory): used in place, never
  copied; recorded as given relative to the settings file's directory (project) or as an
  absolute path (global);
- a git URL (``git:host/user/repo[@ref]``, ``git+https://...``, ``https://``/``ssh://``/
  ``git://`` URLs): ``pip install git+URL[@ref]``;
- a wheel or sdist file (``.whl``, ``.tar.gz``, ``.zip``) is installed by pip, like
- anything else, a PyPI requirement (``name``, ``name==1.2``, ``pypi:name``).

Git and PyPI packages are installed with pip into a virtual environment that pi-actors owns,
made with ``python -m venv`` (never the system's or the project's interpreter):
``<agentDir>/packages/venv`` for global installs, ``<agentDir>/packages/project-<hash of the
project directory>/venv`` for ``-l`` (kept under the agent directory, which tools cannot see:
a tool writing in the workspace must not be able to change code that runs unsandboxed). Next
to it ``installed.json`` maps each source to the distribution pip installed for it, so that
``remove`` uninstalls exactly that. The settings record the sources: ``packages`` in
``<agentDir>/settings.json``, or ``.pi-actors/settings.json`` with ``-l`` (pi's key).

What a package contributes (the "manifest"):

- a local directory: the lists ``skills``, ``prompts``, ``themes``, ``extensions`` (paths
  relative to it) of the ``[tool.pi-actors]`` table of its ``pyproject.toml``; without that
  table, its conventional directories ``skills/``, ``prompts/``, ``themes/``,
  ``extensions/`` where they exist. A local ``.py`` file is one extension.
- an installed distribution: entry points — group ``pi_actors.extensions`` (``name =
  "pkg.module"`` or ``"pkg.module:register"``: extensions, loaded by the extension host with
  the environment's site-packages on its path) and group ``pi_actors.resources`` (``name =
  "pkg"``: a package whose directory holds ``skills/``, ``prompts/``, ``themes/`` as package
  data).

:func:`installed_packages` reads all of this without starting any interpreter (it reads the
environment's ``*.dist-info``), so sessions start as fast with packages as without.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from typing import Any

from ..coding.resources import PackageResources
from ._config import ConfigError

__all__ = ["main", "installed_packages", "extension_specs", "Scope", "classify"]

_KINDS = ("skills", "prompts", "themes", "extensions")


@dataclass
class Scope:
    """Where a scope's packages are recorded and installed."""

    name: str  # "user" (global) or "project"
    settings_path: str
    env_dir: str

    @property
    def venv(self) -> str:
        return os.path.join(self.env_dir, "venv")

    @property
    def python(self) -> str:
        return os.path.join(self.venv, "bin", "python")

    @property
    def record_path(self) -> str:
        return os.path.join(self.env_dir, "installed.json")

    def site_packages(self) -> list[str]:
        lib = os.path.join(self.venv, "lib")
        try:
            return [os.path.join(lib, d, "site-packages") for d in sorted(os.listdir(lib)) if d.startswith("python")]
        except OSError:
            return []


def scope(agent_dir: str, cwd: str, local: bool) -> Scope:
    """The global scope, or with ``local`` the project's of ``cwd``."""
    base = os.path.join(os.path.abspath(agent_dir), "packages")
    if not local:
        return Scope("user", os.path.join(agent_dir, "settings.json"), base)
    project = os.path.abspath(cwd)
    digest = hashlib.sha256(project.encode()).hexdigest()[:16]
    return Scope("project", os.path.join(project, ".pi-actors", "settings.json"), os.path.join(base, f"project-{digest}"))


def classify(source: str) -> tuple[str, str]:
    """``(kind, target)``: ``("local", path)``, ``("git", pip requirement)`` or ``("pypi",
    pip requirement)`` for a package source. Raises ConfigError for an empty source."""
    text = source.strip()
    if not text:
        raise ConfigError("a package source is empty")
    if text.endswith((".whl", ".tar.gz", ".zip")) and os.path.isfile(os.path.expanduser(text)):
        return "pypi", os.path.abspath(os.path.expanduser(text))  # a distribution file: pip installs it
    if text.startswith(("/", "./", "../", "~")) or text in (".", "..") or os.path.isdir(text):
        return "local", text
    if text.startswith("git:"):
        rest = text[4:]
        if rest.startswith("git@"):
            rest = "ssh://" + rest.replace(":", "/", 1)
        elif "://" not in rest:
            rest = "https://" + rest
        return "git", "git+" + rest
    if text.startswith("git+"):
        return "git", text
    if text.startswith(("https://", "http://", "ssh://", "git://")):
        return "git", "git+" + text
    return "pypi", text.removeprefix("pypi:")


# -- settings and records ----------------------------------------------------------------------


def _read_json(path: str) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path} must hold a JSON object")
    return data


def _write_json(path: str, data: dict[str, Any]) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=2)
        f.write("\n")
    os.replace(tmp, path)


def _sources(where: Scope) -> list[str]:
    value = _read_json(where.settings_path).get("packages") or []
    if not isinstance(value, list):
        raise ConfigError(f"{where.settings_path}: packages must be a list of sources")
    return [v if isinstance(v, str) else str((v or {}).get("source", "")) for v in value if v]


def _set_sources(where: Scope, sources: list[str]) -> None:
    data = _read_json(where.settings_path)
    data["packages"] = sources
    _write_json(where.settings_path, data)


def _records(where: Scope) -> dict[str, list[str]]:
    data = _read_json(where.record_path)
    return {k: [str(d) for d in v] for k, v in data.items() if isinstance(v, list)}


def _local_path(source: str, where: Scope) -> str:
    path = os.path.expanduser(source)
    return os.path.normpath(os.path.join(os.path.dirname(where.settings_path), path))


def _recorded_form(source: str, where: Scope, cwd: str) -> str:
    """A local source as the settings keep it: absolute (global) or relative to the project
    settings' directory (``-l``)."""
    absolute = os.path.abspath(os.path.join(cwd, os.path.expanduser(source)))
    if where.name == "project":
        return os.path.relpath(absolute, os.path.dirname(where.settings_path))
    return absolute


# -- what packages contribute --------------------------------------------------------------------


def _local_manifest(path: str, source: str, scope_name: str) -> PackageResources:
    out = PackageResources(source=source, scope=scope_name)
    if os.path.isfile(path):
        if path.endswith(".py"):
            out.extensions.append(path)
        return out
    table: dict[str, Any] | None = None
    try:
        with open(os.path.join(path, "pyproject.toml"), "rb") as f:
            table = tomllib.load(f).get("tool", {}).get("pi-actors")
    except (OSError, tomllib.TOMLDecodeError):
        table = None
    for kind in _KINDS:
        if isinstance(table, dict):
            entries = table.get(kind) or []
            found = [os.path.normpath(os.path.join(path, e)) for e in entries if isinstance(e, str)]
        else:
            found = [os.path.join(path, kind)] if os.path.isdir(os.path.join(path, kind)) else []
        getattr(out, kind).extend(found)
    return out


def _distribution_manifest(where: Scope, source: str, names: list[str]) -> PackageResources:
    from importlib import metadata  # (~0.1 s with the email package it imports: only when a package is installed)

    out = PackageResources(source=source, scope=where.name)
    sites = where.site_packages()
    for name in names:
        dists = list(metadata.distributions(name=name, path=sites))
        if not dists:
            continue
        for ep in dists[0].entry_points:
            if ep.group == "pi_actors.extensions":
                out.modules.append("module:" + ep.value.replace(" ", ""))
            elif ep.group == "pi_actors.resources":
                parts = ep.value.split(":")[0].strip().split(".")
                package_dir = next((d for d in (os.path.join(s, *parts) for s in sites) if os.path.isdir(d)), None)
                if package_dir:
                    for kind in ("skills", "prompts", "themes"):
                        if os.path.isdir(os.path.join(package_dir, kind)):
                            getattr(out, kind).append(os.path.join(package_dir, kind))
    return out


def installed_packages(agent_dir: str, cwd: str) -> tuple[list[PackageResources], list[str]]:
    """What the packages in the settings contribute, project packages first (they win on a
    name, as pi's), and one warning per package that is missing or not installed. Never
    raises for a package: a broken one is skipped with its warning."""
    out: list[PackageResources] = []
    warnings: list[str] = []
    for where in (scope(agent_dir, cwd, True), scope(agent_dir, cwd, False)):
        try:
            sources, records = _sources(where), _records(where)
        except ConfigError as exc:
            warnings.append(f"Warning (packages): {exc}")
            continue
        for source in sources:
            kind, _target = classify(source)
            if kind == "local":
                path = _local_path(source, where)
                if not os.path.exists(path):
                    warnings.append(f"Warning (packages): {source}: {path} does not exist")
                    continue
                out.append(_local_manifest(path, source, where.name))
            elif source in records:
                out.append(_distribution_manifest(where, source, records[source]))
            else:
                warnings.append(f"Warning (packages): {source} is in {where.settings_path} but not installed; run: pi-actors install {source}")
    return out, warnings


def extension_specs(packages: list[PackageResources], agent_dir: str, cwd: str) -> tuple[list[str], list[str]]:
    """``(specs, sys_path)`` for the extension host (the ext-host helper's
    ``ExtensionHostConfig``): extension paths of local packages and ``module:`` specs of entry
    points, and the site-packages directories of the package environments."""
    specs = [p for pkg in packages for p in pkg.extensions] + [m for pkg in packages for m in pkg.modules]
    paths = [p for local in (True, False) for p in scope(agent_dir, cwd, local).site_packages() if os.path.isdir(p)]
    return specs, paths


# -- pip ------------------------------------------------------------------------------------------


def _pip(where: Scope, *args: str) -> None:
    """Run pip on the scope's environment, creating it first with ``python -m venv`` if
    missing. pip is pi-actors' own when it has one (``pip --python ENV``: the environment
    needs no pip of its own and is made in a moment), else the environment's. Its output
    goes to the terminal. Raises ConfigError when it fails."""
    import importlib.util

    own_pip = importlib.util.find_spec("pip") is not None
    if not os.path.exists(where.python):
        os.makedirs(where.env_dir, exist_ok=True)
        print(f"Creating the package environment {where.venv}", file=sys.stderr)
        made = subprocess.run([sys.executable, "-m", "venv", *(["--without-pip"] if own_pip else []), where.venv], check=False)
        if made.returncode != 0:
            raise ConfigError(f"cannot create the package environment {where.venv}")
    pip = [sys.executable, "-m", "pip", "--python", where.python] if own_pip else [where.python, "-m", "pip"]
    done = subprocess.run([*pip, "--disable-pip-version-check", *args], check=False)
    if done.returncode != 0:
        raise ConfigError(f"pip {args[0]} failed (exit status {done.returncode})")


def _pip_install(where: Scope, requirement: str, *, upgrade: bool = False) -> list[str]:
    report = os.path.join(where.env_dir, "pip-report.json")
    _pip(where, "install", "--no-input", *(["--upgrade"] if upgrade else []), "--report", report, requirement)
    try:
        items = _read_json(report).get("install") or []
    finally:
        try:
            os.unlink(report)
        except OSError:
            pass
    names = [i["metadata"]["name"] for i in items if i.get("requested") and isinstance(i.get("metadata"), dict)]
    return names


# -- the commands ---------------------------------------------------------------------------------


def _install(args: argparse.Namespace, agent_dir: str, cwd: str) -> int:
    where = scope(agent_dir, cwd, args.local)
    kind, target = classify(args.source)
    sources = _sources(where)
    if kind == "local":
        path = os.path.abspath(os.path.join(cwd, os.path.expanduser(args.source)))
        if not os.path.exists(path):
            raise ConfigError(f"{args.source}: no such file or directory")
        recorded = _recorded_form(args.source, where, cwd)
    else:
        recorded = target if os.path.isabs(target) else args.source  # a distribution file: by its absolute path
        names = _pip_install(where, target)
        records = _records(where)
        records[recorded] = names or records.get(recorded, [])
        _write_json(where.record_path, records)
    if recorded not in sources:
        _set_sources(where, [*sources, recorded])
    print(f"Installed {recorded} ({'project' if args.local else 'global'})")
    return 0


def _find(source: str, where: Scope, cwd: str) -> str | None:
    sources = _sources(where)
    if source in sources:
        return source
    kind, target = classify(source)
    if kind != "local" and target in sources:
        return target
    if kind == "local":
        wanted = os.path.abspath(os.path.join(cwd, os.path.expanduser(source)))
        return next((s for s in sources if classify(s)[0] == "local" and _local_path(s, where) == wanted), None)
    return None


def _remove(args: argparse.Namespace, agent_dir: str, cwd: str) -> int:
    where = scope(agent_dir, cwd, args.local)
    found = _find(args.source, where, cwd)
    if found is None:
        raise ConfigError(f"{args.source} is not installed ({'project' if args.local else 'global'}); see: pi-actors list")
    records = _records(where)
    names = records.pop(found, [])
    if names:
        _pip(where, "uninstall", "--yes", *names)
        _write_json(where.record_path, records)
    _set_sources(where, [s for s in _sources(where) if s != found])
    print(f"Removed {found} ({where.name if where.name == 'project' else 'global'})")
    return 0


def _update(args: argparse.Namespace, agent_dir: str, cwd: str) -> int:
    updated = 0
    for local in (False, True):
        where = scope(agent_dir, cwd, local)
        records = _records(where)
        for source in _sources(where):
            if args.source and source != args.source:
                continue
            kind, target = classify(source)
            if kind == "local":
                print(f"{source}: a local path, used in place")
                continue
            records[source] = _pip_install(where, target, upgrade=True) or records.get(source, [])
            _write_json(where.record_path, records)
            print(f"Updated {source}")
            updated += 1
    if args.source and not updated:
        raise ConfigError(f"{args.source} is not an installed git or PyPI package; see: pi-actors list")
    return 0


def _list(args: argparse.Namespace, agent_dir: str, cwd: str) -> int:
    any_listed = False
    for local in (False, True):
        where = scope(agent_dir, cwd, local)
        sources = _sources(where)
        if not sources:
            continue
        any_listed = True
        print(f"{'Project' if local else 'Global'} packages ({where.settings_path}):")
        records = _records(where)
        for source in sources:
            kind, _ = classify(source)
            detail = _local_path(source, where) if kind == "local" else ", ".join(records.get(source, [])) or "not installed"
            print(f"  {source}  [{kind}] {detail}")
    if not any_listed:
        print("No packages installed.")
    return 0


def build_parser(command: str) -> argparse.ArgumentParser:
    descriptions = {
        "install": "install a package (a PyPI requirement, a git URL or a local path) and record it in the settings",
        "remove": "remove an installed package and its record",
        "update": "upgrade the installed git and PyPI packages (or one of them)",
        "list": "list the installed packages, global and of this project",
    }
    from ._usage import CliParser

    p = CliParser(prog=f"pi-actors {command}", description=descriptions[command])
    if command in ("install", "remove"):
        p.add_argument("source", help="the package source, as given to install")
        p.add_argument("-l", "--local", action="store_true", help="the project's packages (.pi-actors/settings.json)")
    elif command == "update":
        p.add_argument("source", nargs="?", help="only this package")
    return p


def main(argv: list[str], command: str) -> int:
    """Run ``pi-actors COMMAND argv`` (``install``, ``remove``/``uninstall``, ``update``,
    ``list``). Returns the exit code; raises ConfigError (one line) for a user mistake or a
    failed pip."""
    from ._paths import agent_dir

    command = "remove" if command == "uninstall" else command
    args = build_parser(command).parse_args(argv)
    handler = {"install": _install, "remove": _remove, "update": _update, "list": _list}[command]
    return handler(args, agent_dir(), os.getcwd())


def entry(command: str) -> Any:
    """The ``main(argv)`` of one package subcommand (for the CLI's subcommand table)."""
    return lambda argv: main(argv, command)
