"""A local Ray cluster for tests: a head and worker nodes started with ``ray start``.

:func:`start_cluster` starts the head, then the workers, one after the other (a node whose
raylet aborts because its agents started too slowly on a loaded machine is killed and started
again, up to 3 times), each with its own ``--temp-dir`` under the directory given, its own
ports, ``--num-cpus 1``, a small object store, no dashboard, and a custom resource naming it (``{"pi_node_head": 1}``,
``{"pi_node_w1": 1}``, …; the workers also get ``{"pi_worker": 1}``, so a placement asking for
it keeps sessions off the head, whose raylet the driver is attached to). Token
authentication is on, as Ray asks of a cluster reachable from the network: a fresh token in
``RAY_AUTH_TOKEN`` with ``RAY_AUTH_MODE=token`` — :attr:`RayCluster.env` is what a driver
adds to its environment to join (nothing is written under ``~/.ray``).

Stopping (:meth:`RayCluster.stop`): not ``ray stop``, which kills every Ray process of the
machine (another test's cluster too), but SIGKILL to exactly this cluster's processes: those
whose command line names one of its temp dirs, everything under them, and every process seen
under them earlier (a killed raylet's orphans), found through /proc. ``stop`` returns what
is still alive after waiting for their exits; a test asserts it is empty.

Ray's processes rename themselves (``ray::IDLE``) over their command line and environment, so
the process tree is the only reliable way to find them; :meth:`RayCluster.node_of` walks it
up from a session process to the raylet that owns it.

:func:`ray_cluster_fixture` makes a module-scoped pytest fixture of it (skipped with the reason
when Ray is not installed).
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

__all__ = ["RayCluster", "RayNode", "ray_cluster_fixture", "start_cluster"]

#: Faster failure detection: a raylet that stops answering is declared dead after ~6 s
#: instead of Ray's default ~30 s (a check every 2 s, three misses; each may take 5 s, so a
#: live raylet on a loaded machine is not taken for dead).
_SYSTEM_ENV = {
    "RAY_health_check_initial_delay_ms": "2000",
    "RAY_health_check_period_ms": "2000",
    "RAY_health_check_timeout_ms": "5000",
    "RAY_health_check_failure_threshold": "3",
    "RAY_USAGE_STATS_ENABLED": "0",
}


_handed_out: set[int] = set()


def _free_port() -> int:
    """A port free now and not handed out before in this process (the kernel may hand the
    same free port to two binds in a row; two of a node's ports alike make Ray fail)."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        if port not in _handed_out:
            _handed_out.add(port)
            return port


def _children() -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as f:
                    data = f.read()
                ppid = int(data[data.rindex(b")") + 2 :].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            out.setdefault(ppid, []).append(int(entry))
    return out


def _ancestors(pid: int) -> set[int]:
    out = set()
    while pid > 1 and pid not in out:
        out.add(pid)
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                data = f.read()
            pid = int(data[data.rindex(b")") + 2 :].split()[1])
        except (OSError, ValueError, IndexError):
            break
    return out


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
        return data[data.rindex(b")") + 2 : data.rindex(b")") + 3] not in (b"Z", b"X")
    except (OSError, ValueError):
        return False


def _start_time(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
        return data[data.rindex(b")") + 2 :].split()[19].decode()
    except (OSError, ValueError, IndexError):
        return ""


@dataclass
class RayNode:
    """One node: ``name`` (``head``, ``w1``…), its custom ``resource`` and ``temp_dir``."""

    name: str
    resource: str
    temp_dir: Path

    def raylet(self) -> int | None:
        """The pid of this node's raylet, if it runs."""
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                cmd = _cmdline(int(entry))
                if "/raylet/raylet " in cmd and f"--temp_dir={self.temp_dir} " in cmd:
                    return int(entry)
        return None


@dataclass
class RayCluster:
    """A running cluster: ``address`` (the head's ``host:port``), ``env`` (what a driver adds
    to join it), ``nodes`` (head first)."""

    root: Path
    address: str
    env: dict[str, str]
    nodes: list[RayNode]
    _seen: dict[int, str] = field(default_factory=dict)

    @property
    def workers(self) -> list[RayNode]:
        return self.nodes[1:]

    def processes(self, under: Path | None = None) -> list[int]:
        """Live pids of this cluster (or of the node whose temp dir is ``under``): processes
        naming its temp dirs and their descendants, plus those seen before (kept by start
        time, so a reused pid is not taken)."""
        tree = _children()
        needle = f"{under or self.root}/"
        mine = _ancestors(os.getpid())  # this process and its parents never count
        roots = [int(e) for e in os.listdir("/proc") if e.isdigit() and int(e) not in mine and needle in _cmdline(int(e))]
        stack, found = list(roots), set()
        while stack:
            pid = stack.pop()
            if pid not in found:
                found.add(pid)
                stack.extend(tree.get(pid, []))
        for pid in found:
            self._seen.setdefault(pid, _start_time(pid))
        if under is not None:
            return sorted(p for p in found if _alive(p))
        return sorted(p for p, started in self._seen.items() if _alive(p) and _start_time(p) == started)

    def node_of(self, pid: int) -> RayNode | None:
        """The node whose raylet ``pid`` runs under (a session process, a Ray worker)."""
        raylets = {node.raylet(): node for node in self.nodes}
        while pid > 1:
            if pid in raylets:
                return raylets[pid]
            try:
                with open(f"/proc/{pid}/stat", "rb") as f:
                    data = f.read()
                pid = int(data[data.rindex(b")") + 2 :].split()[1])
            except (OSError, ValueError, IndexError):
                return None
        return None

    def kill_raylet(self, node: RayNode) -> None:
        """SIGKILL ``node``'s raylet (its workers and their sessions are remembered first)."""
        self.processes()
        pid = node.raylet()
        assert pid is not None, f"node {node.name} has no raylet"
        os.kill(pid, signal.SIGKILL)

    def stop(self, timeout: float = 20.0, under: Path | None = None) -> list[int]:
        """Kill every process of the cluster (or of the node whose temp dir is ``under``);
        the pids still alive after ``timeout`` s."""
        for _ in range(3):  # a dying process may still have forked: look again
            pids = self.processes(under)
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            _wait_gone(pids, timeout)
        return self.processes(under)


def _wait_gone(pids: list[int], timeout: float) -> None:
    import select

    fds = []
    for pid in pids:
        try:
            fds.append(os.pidfd_open(pid))
        except OSError:
            pass
    try:
        for fd in fds:
            select.select([fd], [], [], timeout)
    finally:
        for fd in fds:
            os.close(fd)


#: ``ray start``, except that a node's registration with the head may take up to 3 minutes
#: instead of Ray's fixed 30 s (node.py): on a loaded 2-core machine the node's Python agents,
#: which the raylet waits for before registering, can take longer than that to start. It
#: stops waiting once the node's raylet is gone (it aborts when its agents start too slowly;
#: the caller then starts the node again).
_RAY_START = """
import os, sys, time
import ray._private.services as services
from ray.scripts.scripts import main

_get_node = services.get_node
_temp = next(a.split("=", 1)[1] for a in sys.argv if a.startswith("--temp-dir="))

def _raylet_alive():
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if "/raylet/raylet " in cmd and f"--temp_dir={_temp} " in cmd:
            return True
    return False

def get_node(*args, **kwargs):
    started = time.monotonic()
    while True:
        try:
            return _get_node(*args, **kwargs)
        except RuntimeError:
            if time.monotonic() - started > 180 or (time.monotonic() - started > 5 and not _raylet_alive()):
                raise
            time.sleep(0.5)

services.get_node = get_node
sys.argv[0] = "ray"
sys.exit(main())
"""


def _ray_start(args: list[str], env: dict[str, str], log: Path) -> None:
    argv = [sys.executable, "-c", _RAY_START, "start", *args]
    with open(log, "wb") as out:
        done = subprocess.run(argv, env=env, stdout=out, stderr=subprocess.STDOUT, timeout=300, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"ray start {args[0]} failed ({done.returncode}): {log.read_text()[-2000:]}")


def _node_args(node: RayNode, resources: dict[str, float]) -> list[str]:
    return [
        "--num-cpus=1",
        f"--resources={json.dumps(resources)}",
        f"--temp-dir={node.temp_dir}",
        "--object-store-memory=80000000",
        "--disable-usage-stats",
        f"--dashboard-agent-listen-port={_free_port()}",
        f"--dashboard-agent-grpc-port={_free_port()}",
        f"--runtime-env-agent-port={_free_port()}",
        f"--metrics-export-port={_free_port()}",
    ]


def start_cluster(root: Path, workers: int = 2) -> RayCluster:
    """Start a head and ``workers`` worker nodes under ``root`` (module docstring). On failure
    whatever started is killed before the error propagates."""
    root.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, **_SYSTEM_ENV, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(24)}
    env.pop("RAY_ADDRESS", None)
    head = RayNode("head", "pi_node_head", root / "head")
    nodes = [head] + [RayNode(f"w{i}", f"pi_node_w{i}", root / f"w{i}") for i in range(1, workers + 1)]
    port = _free_port()
    cluster = RayCluster(root, "", {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": env["RAY_AUTH_TOKEN"]}, nodes)
    try:
        # One node after the other: started side by side on a loaded machine, their Python
        # agents start too slowly for their raylets (which then abort).
        host = _host()
        cluster.address = f"{host}:{port}"
        head_args = ["--head", f"--port={port}", f"--node-ip-address={host}", "--include-dashboard=false",
                     f"--dashboard-port={_free_port()}", *_node_args(head, {head.resource: 1})]  # fmt: skip
        _start_node(cluster, head, head_args, env)
        for node in nodes[1:]:
            args = [f"--address={cluster.address}", f"--node-ip-address={host}", *_node_args(node, {node.resource: 1, "pi_worker": 1})]
            _start_node(cluster, node, args, env)
    except BaseException:
        cluster.stop()
        raise
    return cluster


def _start_node(cluster: RayCluster, node: RayNode, args: list[str], env: dict[str, str]) -> None:
    """Start a node; if it fails (its raylet aborted: its agents were too slow to start on a
    loaded machine), what it started is killed and it starts again (3 tries)."""
    for attempt in range(3):
        try:
            _ray_start(args, env, cluster.root / f"{node.name}.log")
            return
        except RuntimeError:
            cluster.stop(under=node.temp_dir)
            if attempt == 2:
                raise


def _host() -> str:
    """The address Ray takes for this machine (its nodes would pick it themselves)."""
    from ray.util import get_node_ip_address

    return str(get_node_ip_address())


def ray_cluster_fixture(workers: int = 2):  # type: ignore[no-untyped-def]
    """A module-scoped pytest fixture yielding a started :class:`RayCluster`; at teardown it
    is killed and the test fails if any of its processes is left."""

    @pytest.fixture(scope="module")
    def ray_cluster() -> Iterator[RayCluster]:
        pytest.importorskip("ray", reason="Ray is not installed (pip install 'pi-actors[ray]')")
        # Short: Ray's unix socket paths (temp dir + a long session name) must fit 107 bytes.
        root = Path(tempfile.mkdtemp(prefix="pray-", dir="/tmp"))
        try:
            cluster = start_cluster(root, workers)
            try:
                yield cluster
            finally:
                left = cluster.stop()
                assert not left, f"Ray processes left after the cluster was stopped: {left}"
        finally:
            shutil.rmtree(root, ignore_errors=True)

    return ray_cluster
