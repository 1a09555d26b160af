"""The bubblewrap command line for a sandboxed tool-worker zygote.

:func:`build_argv` turns a :class:`~pi_actors.coding.sandbox.SandboxPolicy` and the zygote's
own command into ``bwrap <options> -- <command>``. Mounts are applied in this order (later
ones cover earlier ones):

1. ``--ro-bind / /``: everything readable, nothing writable; ``--dev /dev`` (a minimal
   /dev, read-only at the end), ``--proc /proc`` (the sandbox's own PID namespace);
2. size-limited tmpfs (:class:`~pi_actors.coding.sandbox.Limits`): ``/dev/shm``
   (``shm_size``) and ``/tmp`` (``tmp_size``) — mounted in the zygote's namespace, so all
   the workers of a sandbox share them (a file one call writes there, such as bash's
   full-output file, can be read by the next), and they vanish with the sandbox; ``/run``
   (service sockets: docker, dbus, ...) an empty read-only tmpfs;
3. ``$HOME`` (``policy.home``): an empty tmpfs, read-only at the end, with the allow-listed
   paths (:func:`home_allowed`) bound read-only into it — unless ``$HOME`` is the workspace
   (then shown, its credential stores masked) or lies inside it (then hidden after step 6);
4. hidden paths (:func:`hidden_paths`: credential stores, ``policy.hidden``) not already
   hidden with ``$HOME``: directories covered by a small tmpfs (read-only at the end), files
   by ``/dev/null``;
5. read-only re-binds of what the worker needs to start (the interpreter, the virtualenv,
   the package — :func:`essential_paths`) where 2–4 covered them;
6. the workspace: read-write for ``workspace-write``, read-only for ``read-only``;
7. hidden paths inside the workspace (a session directory kept there) or inside an
   allow-listed path; the ``read_only`` paths (skill directories, :func:`shown_read_only`)
   bound read-only; then ``--remount-ro`` of every tmpfs but ``/tmp`` and ``/dev/shm``.

The zygote starts in ``/`` (``--chdir /``): the workspace is never its working directory.

Namespaces and process options: ``--unshare-pid --as-pid-1`` (the command, the tool-worker
zygote, is the init of the sandbox; each worker it forks is in turn the init of a PID
namespace of its own: a tool can neither see nor signal anything outside it, nor kill the
worker), ``--unshare-ipc --unshare-uts --unshare-cgroup-try``, ``--unshare-net`` unless
network is allowed, ``--new-session``, ``--cap-drop ALL --cap-add CAP_SYS_ADMIN --cap-add
CAP_SETPCAP`` (the zygote's two, which every worker drops before serving a call); bwrap
itself sets no-new-privileges. No ``--die-with-parent``: the zygote exits when the pool's
control socket closes (see :mod:`pi_actors.actors._sandboxed` for why). A non-root user gets a user namespace
automatically (bwrap is not setuid).

:func:`check_bwrap` finds ``bwrap`` and runs it once with the same namespace options, so a
sandbox that cannot work is reported with bwrap's own reason before any worker starts.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from functools import lru_cache

from . import SandboxPolicy, SandboxUnavailable

__all__ = ["build_argv", "check_bwrap", "essential_paths", "hidden_paths", "home_allowed", "shown_read_only", "CREDENTIAL_PATHS", "MASK_SIZE"]

# Relative to $HOME: credential stores and other agents' state, never visible to tools.
CREDENTIAL_PATHS = (
    ".ssh",
    ".gnupg",
    ".aws",
    ".azure",
    ".config/gcloud",
    ".kube",
    ".docker",
    ".netrc",
    ".git-credentials",
    ".config/gh",
    ".npmrc",
    ".pypirc",
    ".pi",
    ".pi-actors",
    ".codex",
    ".claude",
)

_OFF_HINT = "Run with --sandbox off to run tools without a sandbox."


def _namespace_options(policy: SandboxPolicy) -> list[str]:
    options = [
        "--new-session",
        "--unshare-pid",
        "--as-pid-1",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--cap-drop",
        "ALL",
        # The zygote's, to give each worker its own PID and mount namespaces; the workers
        # drop every capability (see pi_actors.actors._zygote).
        "--cap-add",
        "CAP_SYS_ADMIN",
        "--cap-add",
        "CAP_SETPCAP",
    ]
    if not policy.allow_network:
        options.append("--unshare-net")
    return options


@lru_cache(maxsize=8)
def _probe(bwrap: str, options: tuple[str, ...]) -> str | None:
    """None if ``bwrap`` works with ``options``, else bwrap's complaint."""
    argv = [bwrap, *options, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--", "/bin/true"]
    try:
        # In a session of its own, as the zygote's launcher (pi_actors.actors._sandboxed): a
        # Ctrl-C or terminal hang-up that killed it mid-set-up would strand its namespace child.
        done = subprocess.run(
            argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=20, check=False, start_new_session=True
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return f"{bwrap} could not be run: {exc}"
    if done.returncode != 0:
        reason = done.stderr.decode("utf-8", "replace").strip() or f"exit status {done.returncode}"
        return f"bubblewrap failed to create a sandbox: {reason}"
    return None


def check_bwrap(policy: SandboxPolicy) -> str:
    """The ``bwrap`` path, after checking that it can build this policy's namespaces.

    Raises :class:`SandboxUnavailable` with the reason (and how to opt out) otherwise.
    """
    if not sys.platform.startswith("linux"):
        raise SandboxUnavailable(f"the {policy.mode} sandbox needs Linux (bubblewrap). {_OFF_HINT}")
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        raise SandboxUnavailable(
            f"the {policy.mode} sandbox needs bubblewrap, and 'bwrap' is not installed "
            f"(e.g. apt-get install bubblewrap). {_OFF_HINT}"
        )
    problem = _probe(bwrap, tuple(_namespace_options(policy)))
    if problem is not None:
        raise SandboxUnavailable(f"{problem.rstrip('.')}. {_OFF_HINT}")
    return bwrap


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def hidden_paths(policy: SandboxPolicy) -> list[str]:
    """Existing paths to hide: credential stores under ``policy.home`` (default ``$HOME``)
    and ``policy.hidden`` (agent and session directories, log file, server sockets and
    tokens), symlinks resolved, never ``/``."""
    home = _home(policy)
    candidates = [os.path.join(home, rel) for rel in CREDENTIAL_PATHS] if home else []
    candidates += list(policy.hidden)
    out: list[str] = []
    for path in candidates:
        # A symlinked store is hidden where it really lives.
        path = os.path.realpath(path)
        if path != "/" and os.path.exists(path) and path not in out:
            out.append(path)
    return out


#: Credential stores that are agent directories: what else they hold (skills, prompts) may
#: be shown below them; nothing inside the other stores is ever shown.
_AGENT_STORES = (".pi", ".pi-actors")


def shown_read_only(policy: SandboxPolicy, workspace: str) -> list[str]:
    """``policy.read_only`` (skill directories) to bind read-only after the masks: existing
    absolute paths outside the workspace (already visible there), symlinks resolved. Left
    hidden: a path that contains a hidden path or a credential store (it would uncover the
    agent directory, a session directory, ``~/.ssh``...), and a path inside a credential
    store other than an agent directory (``~/.pi``, ``~/.pi-actors``, whose ``skills`` are
    shown but never their ``auth.json``, which lies beside them)."""
    home = _home(policy)
    stores = [os.path.realpath(os.path.join(home, rel)) for rel in CREDENTIAL_PATHS] if home else []
    closed = [os.path.realpath(os.path.join(home, rel)) for rel in CREDENTIAL_PATHS if rel not in _AGENT_STORES] if home else []
    secret = hidden_paths(policy) + stores
    out: list[str] = []
    for raw in policy.read_only:
        if not os.path.isabs(raw) or not os.path.exists(raw):
            continue
        path = os.path.realpath(raw)
        if _inside(path, workspace) or path in out:
            continue
        if any(_inside(h, path) for h in secret) or any(_inside(path, s) for s in closed):
            continue
        out.append(path)
    return out


def _home(policy: SandboxPolicy) -> str | None:
    home = policy.home or os.path.expanduser("~")
    if not home or not os.path.isabs(home):
        return None
    home = os.path.realpath(home)
    return home if home != "/" and os.path.isdir(home) else None


def home_allowed(policy: SandboxPolicy, home: str, workspace: str) -> list[str]:
    """The allow-listed paths of ``home`` that exist, minus any inside a ``hidden`` path (one
    that does not contain the workspace: that one cannot be hidden)."""
    hidden = [h for h in (os.path.realpath(p) for p in policy.hidden) if not _inside(workspace, h)]
    out: list[str] = []
    for rel in policy.home_allow:
        path = os.path.normpath(os.path.join(home, rel))
        if not _inside(path, home) or path == home or not os.path.lexists(path):
            continue
        real = os.path.realpath(path)
        if any(_inside(path, h) or _inside(real, h) for h in hidden) or path in out:
            continue
        out.append(path)
    return out


def essential_paths() -> list[str]:
    """What the worker needs to start: the interpreter, its prefixes, the package, sys.path."""
    import pi_actors

    paths = {
        sys.prefix,
        sys.base_prefix,
        sys.exec_prefix,
        os.path.dirname(os.path.abspath(sys.executable)),
        os.path.dirname(os.path.realpath(sys.executable)),
        os.path.dirname(os.path.dirname(os.path.abspath(pi_actors.__file__))),
    }
    # sys.path[0] is the directory of the running script (or the cwd): not the worker's.
    paths.update(p for p in sys.path[1:] if p)
    return sorted(p for p in (os.path.abspath(p) for p in paths) if os.path.exists(p))


#: Size of the tmpfs that only hide something (they are read-only once set up).
MASK_SIZE = 1024 * 1024


def _mask(path: str) -> list[str]:
    if os.path.isdir(path):
        return ["--perms", "0755", "--size", str(MASK_SIZE), "--tmpfs", path]
    return ["--ro-bind", "/dev/null", path]


class _Plan:
    """The bwrap mount options in order, and which tmpfs to make read-only at the end."""

    def __init__(self) -> None:
        self.argv: list[str] = []
        self.read_only: list[str] = []
        self.covered: list[str] = []  # paths that a mount replaced

    def mask(self, path: str) -> None:
        self.argv += _mask(path)
        self.covered.append(path)
        if os.path.isdir(path):
            self.read_only.append(path)

    def rebind(self, paths: Sequence[str], *, unless_inside: str | None = None, roots: Sequence[str] | None = None) -> None:
        """Re-expose (read-only) each of ``paths`` that lies strictly below a covered path."""
        for path in paths:
            if unless_inside is not None and _inside(path, unless_inside):
                continue
            if any(_inside(path, root) and path != root for root in (roots if roots is not None else self.covered)):
                self.argv += ["--ro-bind", path, path]


def _base_plan(policy: SandboxPolicy) -> _Plan:
    """The read-only root with fresh /dev, /proc, /dev/shm, /tmp and /run (and the host's
    DNS resolver when the network is allowed)."""
    limits = policy.limits
    plan = _Plan()
    plan.argv += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    plan.argv += ["--perms", "1777", "--size", str(limits.shm_size), "--tmpfs", "/dev/shm"]
    plan.argv += ["--perms", "1777", "--size", str(limits.tmp_size), "--tmpfs", "/tmp"]
    plan.argv += ["--perms", "0755", "--size", str(MASK_SIZE), "--tmpfs", "/run"]
    plan.covered += ["/dev", "/tmp", "/run"]
    plan.read_only += ["/dev", "/run"]
    if policy.allow_network and os.path.isdir("/run/systemd/resolve"):
        plan.argv += ["--ro-bind", "/run/systemd/resolve", "/run/systemd/resolve"]  # DNS
    return plan


def _mask_hidden(plan: _Plan, policy: SandboxPolicy, workspace: str, home: str | None, allowed: list[str],
                 exposed: list[str]) -> list[str]:
    """Mask the policy's hidden paths that lie outside the workspace and the allow-list now;
    return those inside, to be masked after the binds that would otherwise uncover them.
    The workspace itself is never hidden; a path already hidden with $HOME is skipped."""
    later: list[str] = []
    for path in hidden_paths(policy):
        if _inside(workspace, path):
            continue  # never hide the workspace itself
        if home and _inside(path, home) and not any(_inside(path, e) for e in exposed):
            continue  # already hidden with $HOME
        if _inside(path, workspace) or any(_inside(path, a) for a in allowed):
            later.append(path)
        else:
            plan.mask(path)
    return later


def build_argv(
    policy: SandboxPolicy,
    command: Sequence[str],
    *,
    bwrap: str = "bwrap",
    status_fd: int | None = None,
) -> list[str]:
    """``bwrap ... -- command`` for ``policy`` (sandboxed modes only); see the module docstring.

    ``status_fd``: an inherited fd on which bwrap reports ``{"child-pid": N}`` (the host pid
    of the sandbox's PID 1) once the sandbox is set up, and ``{"exit-code": N}`` at the end.
    """
    if not policy.sandboxed:
        raise ValueError("policy 'off' has no sandbox")
    if not policy.workspace:
        raise ValueError("a sandbox needs its workspace")
    workspace = os.path.realpath(policy.workspace)
    argv = [bwrap, *_namespace_options(policy)]
    if status_fd is not None:
        argv += ["--json-status-fd", str(status_fd)]
    plan = _base_plan(policy)

    # $HOME: an empty read-only tmpfs showing only the allow-list — unless it is the
    # workspace itself (then only the credential stores and hidden paths are masked). When it
    # lies inside the workspace it is hidden after the workspace's bind.
    home = _home(policy)
    if home == workspace:
        home = None
    allowed = home_allowed(policy, home, workspace) if home else []
    home_inner = home is not None and _inside(home, workspace)
    exposed = allowed + ([workspace] if home and _inside(workspace, home) else [])

    def hide_home() -> None:
        assert home is not None
        plan.mask(home)
        for path in allowed:
            plan.argv += ["--ro-bind", path, path]

    if home and not home_inner:
        hide_home()

    later = _mask_hidden(plan, policy, workspace, home, allowed, exposed)

    essentials = essential_paths()
    plan.rebind(essentials, unless_inside=workspace)
    plan.argv += ["--bind" if policy.mode == "workspace-write" else "--ro-bind", workspace, workspace]
    if home_inner and home is not None:
        hide_home()
        plan.rebind(essentials, roots=[home])
    for path in later:
        plan.mask(path)
    for path in shown_read_only(policy, workspace):
        plan.argv += ["--ro-bind", path, path]
    for path in plan.read_only:
        plan.argv += ["--remount-ro", path]
    return argv + plan.argv + ["--chdir", "/", "--", *command]
