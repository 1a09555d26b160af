"""Scale benchmark (issue 19): batch runs and served sessions on local processes and on Ray.

    .venv/bin/python -m benchmarks.scale [--quick] [--rounds N] [--json]

Everything runs against the in-process scripted model (``ScriptedLLM``, OpenAI wire), reached
by the real CLI (``pi-actors batch`` / ``pi-actors serve`` / ``pi-actors tool-host``) through a
``models.json`` in a private ``PI_ACTORS_DIR``. The Ray cluster is a local one on this machine
(head + 2 workers, ``tests/support/ray_cluster.py``, token auth, ``--num-cpus 1`` per node),
started by this module and killed at the end. Reported, each as a ratio against a baseline
measured in the same run (no assertion on time; on a shared 2-core machine the figures are
noisy). The idle memory is taken first; then ``--rounds`` rounds (default 1 with ``--quick``,
else 2) each measure (1)-(3) once, their order turning every round so that a drift of the
machine's load favours no variant; the medians over the rounds are reported, with the load
average at start and end:

1. **sessions per minute vs slots**: a batch of trivial tasks (one prompt, no tools, one
   reply each) with ``batch --local 1`` (the baseline), ``--local 2`` and ``--ray ADDRESS``
   (sessions placed on the two worker nodes by their ``pi_worker`` resource, 1 CPU each:
   2 slots). Wall time of the whole command, driver start-up included.
2. **time to first task**: from the batch command's start to the first result line in the
   ``--out`` file (polled every 10 ms); ``--local 1`` is the baseline.
3. **extra cost per tool call**: one served session, N turns each one bash ``true`` call,
   then a final text; each turn's client time by the scripted server's clock (end of the reply
   to request i → arrival of request i+1: tool run, session write, next request; none of the
   server's work), median over the turns. Baseline: ``serve`` (local placement) with the
   session's own tool pool. Against it: the same session with its tools in a
   ``pi-actors tool-host`` over WebSocket (same machine); a session placed by
   ``serve --placement ray`` with its own pool on its node; and one with
   ``--ray-tool-hosts`` (its tools in a tool host that Ray places on a worker by a custom
   resource — here the node resource ``pi_node_w2`` the test cluster gives, in place of a
   ``{"tool_host": 1}`` one). All with ``--sandbox off``, so the sandbox is not in the figure.
4. **idle memory**: the summed RSS of the idle Ray cluster's processes (head + 2 workers, no
   session yet) next to the summed RSS of an idle ``pi-actors serve`` (local placement) and
   its children, the baseline.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import trio

from pi_actors.server.client import RemoteSession, connect
from pi_actors.testing.scripted_server import Reply, ScriptedLLM
from pi_actors.testing.wire_formats import ScriptToolCall

CLI = str(Path(sys.executable).with_name("pi-actors"))
MODEL = "scripted/scripted-model"


# -- pure helpers (tests/test_benchmarks_scale.py) ---------------------------------------------


def ratio(value: float, baseline: float) -> str:
    """``value`` as a multiple of ``baseline`` (``1.00x`` = the same), or ``n/a``."""
    if not baseline or value != value or baseline != baseline:
        return "n/a"
    return f"{value / baseline:.2f}x"


def per_minute(tasks: int, seconds: float) -> float:
    return tasks * 60.0 / seconds if seconds > 0 else float("nan")


def turn_gaps(records: list[dict]) -> list[float]:
    """The client's time of each turn from the server's request records (``received``, and
    ``replied`` set by ``on_replied``): arrival of request i+1 minus the end of reply i."""
    return [b["received"] - a["replied"] for a, b in zip(records, records[1:], strict=False) if "replied" in a]


def mib(n: int) -> str:
    return f"{n / 2**20:.0f} MiB"


# -- processes -----------------------------------------------------------------------------------


def _children() -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                data = open(f"/proc/{entry}/stat", "rb").read()
                ppid = int(data[data.rindex(b")") + 2 :].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            out.setdefault(ppid, []).append(int(entry))
    return out


def tree(pid: int) -> list[int]:
    kids, out, stack = _children(), [], [pid]
    while stack:
        p = stack.pop()
        out.append(p)
        stack.extend(kids.get(p, []))
    return out


def rss(pids: list[int]) -> int:
    total = 0
    for pid in pids:
        try:
            for line in open(f"/proc/{pid}/status"):
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) * 1024
        except OSError:
            pass
    return total


class Home:
    """A private PI_ACTORS_DIR (models.json for the scripted server, auto-retry off) and a
    work directory; ``env`` is what every CLI started here runs with."""

    def __init__(self, root: Path, llm: ScriptedLLM) -> None:
        self.home, self.work = root / "agent", root / "work"
        self.home.mkdir(parents=True)
        self.work.mkdir()
        models = {"providers": {"scripted": {"baseUrl": llm.base_url_openai, "api": "openai-completions", "apiKey": "bench-key",
                                             "models": [{"id": "scripted-model"}]}}}  # fmt: skip
        (self.home / "models.json").write_text(json.dumps(models))
        (self.home / "settings.json").write_text(json.dumps({"retry": {"enabled": False}}))
        self.env = {k: v for k, v in os.environ.items() if not (k.endswith("_API_KEY") or k.startswith(("ANTHROPIC_", "OPENAI_")))}
        self.env.pop("RAY_ADDRESS", None)
        self.env["PI_ACTORS_DIR"] = str(self.home)


async def _kill(proc: trio.Process) -> None:
    """End a CLI and everything under it (SIGTERM, then SIGKILL to what is left)."""
    pids = tree(proc.pid)
    if proc.returncode is None:
        proc.terminate()
        with trio.move_on_after(20):
            await proc.wait()
    for pid in pids:
        try:
            os.kill(pid, 9)
        except ProcessLookupError:
            pass
    if proc.returncode is None:
        await proc.wait()


# -- 1 and 2: batches ----------------------------------------------------------------------------


async def run_batch(home: Home, name: str, n: int, placement: list[str]) -> dict:
    tasks = home.work / f"{name}.jsonl"
    out = home.work / f"{name}.results.jsonl"
    tasks.write_text("".join(json.dumps({"id": f"t{i}", "prompt": f"task {i}", "model": MODEL, "tools": []}) + "\n" for i in range(n)))
    first = [float("nan")]
    t0 = time.perf_counter()
    proc = await trio.lowlevel.open_process(
        [CLI, "batch", str(tasks), "--out", str(out), *placement], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        env=home.env, cwd=home.work,
    )  # fmt: skip
    err = bytearray()
    try:
        with trio.fail_after(600):
            async with trio.open_nursery() as nursery:

                async def drain() -> None:
                    while chunk := await proc.stderr.receive_some(65536):
                        err.extend(chunk)

                nursery.start_soon(drain)
                while proc.poll() is None:
                    if first[0] != first[0] and out.exists() and b"\n" in out.read_bytes():
                        first[0] = time.perf_counter() - t0
                    await trio.sleep(0.01)
                await proc.wait()
    finally:
        await _kill(proc)
    wall = time.perf_counter() - t0
    results = [json.loads(line) for line in out.read_text().splitlines()] if out.exists() else []
    ok = sum(1 for r in results if r.get("ok"))
    if first[0] != first[0] and results:
        first[0] = wall
    failure = None if proc.returncode == 0 and ok == n else f"exit {proc.returncode}, {ok}/{n} ok: {err.decode()[-400:]}"
    return {"name": name, "tasks": n, "wall": wall, "first": first[0], "ok": ok, "failure": failure,
            "nodes": sorted({r.get("node", "?") for r in results})}  # fmt: skip


# -- 3: tool calls through serve -----------------------------------------------------------------


class ToolTurns:
    """The scripted model of (3): ``turns`` replies each asking for one bash ``true``, then a
    final text (counted from the tool results in the request)."""

    def __init__(self, turns: int) -> None:
        self.turns = turns

    def __call__(self, body: dict) -> Reply:
        done = sum(1 for m in (body or {}).get("messages", []) if m.get("role") == "tool")
        if done < self.turns:
            return Reply(tool_calls=[ScriptToolCall(id=f"c{done}", name="bash", arguments={"command": "true"})])
        return Reply(text=f"{done} tool calls done")


async def _read_until(proc: trio.Process, buf: bytearray, prefix: str) -> str:
    while True:
        while b"\n" in buf:
            line, _, rest = bytes(buf).partition(b"\n")
            buf[:] = rest
            text = line.decode(errors="replace")
            if text.startswith(prefix):
                return text[len(prefix) :]
        chunk = await proc.stdout.receive_some(65536)
        if not chunk:
            raise RuntimeError(f"serve ended before printing {prefix!r}")
        buf.extend(chunk)


async def _serve(home: Home, *flags: str) -> tuple[trio.Process, str, str]:
    proc = await trio.lowlevel.open_process(
        [CLI, "serve", "--listen", "127.0.0.1:0", "--model", MODEL, "--tools", "bash", "--sandbox", "off", *flags],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=home.env, cwd=home.work,
    )  # fmt: skip
    buf = bytearray()
    with trio.fail_after(180):
        token_file = await _read_until(proc, buf, "admin token file: ")
        url = await _read_until(proc, buf, "listening: ")
    return proc, url, open(token_file).read().strip()


async def tool_turns(llm: ScriptedLLM, url: str, token: str, create: dict, turns: int) -> dict:
    """One session, one prompt of ``turns`` tool turns; per-turn client times (server clock)."""
    async with connect(url, token=token) as peer:
        sid = (await peer.call("create", create))["sessionId"]
        s = await RemoteSession.attach(peer, sid)
        start = len(llm.requests)
        with trio.fail_after(300):
            await s.call("prompt", {"text": "run the tool calls"})
        records = llm.requests[start:]
        await peer.call("remove", {"sessionId": sid})
    gaps = turn_gaps(records)
    ok = len(records) == turns + 1
    return {"gaps": gaps, "median": statistics.median(gaps) if gaps else float("nan"),
            "failure": None if ok else f"{len(records)} requests, {turns + 1} expected"}  # fmt: skip


async def serve_idle(home: Home, settle: float) -> tuple[int, int]:
    """(4)'s baseline: summed RSS and process count of an idle local ``serve`` and its children."""
    proc, _url, _token = await _serve(home)
    try:
        await trio.sleep(settle)
        pids = tree(proc.pid)
        return rss(pids), len(pids)
    finally:
        await _kill(proc)


async def serve_local(llm: ScriptedLLM, home: Home, turns: int, name: str, host_first: bool) -> dict:
    """(3)'s local pool and WebSocket tool host ``name``, on one local ``serve``."""
    out: dict = {}
    proc, url, token = await _serve(home)
    host = None
    try:
        if not host_first:
            out["pool"] = await tool_turns(llm, url, token, {}, turns)
        made = await trio.run_process([CLI, "serve", "token", "add", name, "--role", "tool-host"], capture_stdout=True,
                                      env=home.env, cwd=home.work)  # fmt: skip
        token_file = made.stdout.decode().strip().splitlines()[-1]
        workspace = home.work / f"host-{name}"
        workspace.mkdir()
        host = await trio.lowlevel.open_process(
            [CLI, "tool-host", "--connect", url, "--token-file", token_file, "--name", name, "--workspace", str(workspace), "--sandbox", "off"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=home.env, cwd=home.work,
        )  # fmt: skip
        async with connect(url, token=token) as peer:
            for _ in range(600):  # up to 60 s for the host to register
                if any(h.get("name") == name for h in (await peer.call("list")).get("toolHosts", [])):
                    break
                await trio.sleep(0.1)
            else:
                raise RuntimeError(f"the tool host {name} did not register in 60 s")
        out["ws_host"] = await tool_turns(llm, url, token, {"toolHost": name}, turns)
        if host_first:
            out["pool"] = await tool_turns(llm, url, token, {}, turns)
    finally:
        if host is not None:
            await _kill(host)
        await _kill(proc)
    return out


async def serve_ray(llm: ScriptedLLM, home: Home, cluster, turns: int, tool_hosts: bool) -> dict:
    flags = ["--placement", "ray", "--ray-address", cluster.address, "--ray-resources", '{"pi_worker": 1}']
    if tool_hosts:
        flags += ["--ray-tool-hosts", json.dumps({cluster.workers[-1].resource: 1})]
    proc, url, token = await _serve(home, *flags)
    try:
        return await tool_turns(llm, url, token, {}, turns)
    finally:
        await _kill(proc)


# -- the run ---------------------------------------------------------------------------------------


def _start_cluster(root: Path):
    # The Ray test cluster helper lives with the tests (tests/support/ray_cluster.py); reuse it
    # rather than copy it: put tests/ on the path for this one import.
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    from support.ray_cluster import start_cluster

    return start_cluster(root, workers=2)


def _fmt_s(x: float) -> str:
    return f"{x:6.2f} s" if x == x else "   n/a"


def _line(label: str, value: str, base: str) -> None:
    print(f"  {label:<44} {value:>16}   {base}")


def _failed(exc: Exception) -> dict:
    return {"median": float("nan"), "gaps": [], "failure": f"{type(exc).__name__}: {exc}"}


def _median(values: list[float]) -> float:
    values = [v for v in values if v == v]
    return statistics.median(values) if values else float("nan")


def _loadavg() -> str:
    return open("/proc/loadavg").read().split(" ", 3)[0]


async def main(args: argparse.Namespace) -> None:
    n = 8 if args.quick else 12
    turns = 10 if args.quick else 30
    settle = 3.0 if args.quick else 5.0
    rounds = args.rounds or (1 if args.quick else 2)
    # Short: Ray's unix socket paths (temp dir + session name) must fit 107 bytes.
    root = Path(tempfile.mkdtemp(prefix="pscale-", dir="/tmp"))
    batches: dict[str, list[dict]] = {"local-1": [], "local-2": [], "ray-2w": []}
    tools: dict[str, list[dict]] = {"pool": [], "ws_host": [], "ray_pool": [], "ray_host": []}
    cluster = None
    cluster_rss = cluster_procs = serve_rss = serve_procs = 0
    t_all = time.perf_counter()
    load_start = _loadavg()
    try:
        async with trio.open_nursery() as nursery:
            batch_llm = ScriptedLLM(lambda body: Reply(text="ok"))
            await nursery.start(batch_llm.serve)
            tool_llm = ScriptedLLM(ToolTurns(turns), on_replied=lambda record: record.__setitem__("replied", time.time()))
            await nursery.start(tool_llm.serve)
            bhome, thome = Home(root / "b", batch_llm), Home(root / "t", tool_llm)

            print(f"scale benchmark: {rounds} round(s), {n} tasks per batch, {turns} tool turns per session "
                  f"(shared 2-core machine: noisy; load average {load_start})", flush=True)  # fmt: skip
            serve_rss, serve_procs = await serve_idle(thome, settle)
            print("starting the Ray cluster (head + 2 workers)…", flush=True)
            cluster = await trio.to_thread.run_sync(_start_cluster, root / "ray")
            bhome.env.update(cluster.env)
            thome.env.update(cluster.env)
            await trio.sleep(settle)
            pids = cluster.processes()
            cluster_rss, cluster_procs = rss(pids), len(pids)

            placements = {"local-1": ["--local", "1"], "local-2": ["--local", "2"],
                          "ray-2w": ["--ray", cluster.address, "--resources", '{"pi_worker": 1}', "--per-session-cpus", "1"]}  # fmt: skip
            for r in range(rounds):
                # The order turns every round, so a drift of the machine's load favours no one.
                names = list(placements)
                names = names[r % 3 :] + names[: r % 3]
                for name in names:
                    print(f"round {r + 1}: batch {name}", flush=True)
                    batches[name].append(await run_batch(bhome, f"{name}-r{r}", n, placements[name]))
                units = ["local", "ray_pool", "ray_host"]
                units = units[r % 3 :] + units[: r % 3]
                for unit in units:
                    print(f"round {r + 1}: tool turns {unit}", flush=True)
                    try:
                        if unit == "local":
                            for key, value in (await serve_local(tool_llm, thome, turns, f"h{r}", host_first=r % 2 == 1)).items():
                                tools[key].append(value)
                        else:
                            tools[unit].append(await serve_ray(tool_llm, thome, cluster, turns, unit == "ray_host"))
                    except Exception as exc:  # noqa: BLE001 - reported, not fatal to the other figures
                        for key in ("pool", "ws_host") if unit == "local" else (unit,):
                            tools[key].append(_failed(exc))
            nursery.cancel_scope.cancel()
    finally:
        if cluster is not None:
            left = await trio.to_thread.run_sync(cluster.stop)
            if left:
                print(f"WARNING: Ray processes left after stop: {left}")
        shutil.rmtree(root, ignore_errors=True)

    print(f"\nload average at start {load_start}, at end {_loadavg()}; medians over {rounds} round(s)")
    print(f"\n1. sessions per minute vs slots ({n} trivial tasks, whole command; baseline --local 1)")
    walls = {name: _median([b["wall"] for b in runs if not b["failure"]]) for name, runs in batches.items()}
    base_rate = per_minute(n, walls["local-1"])
    for name, runs in batches.items():
        rate = per_minute(n, walls[name])
        failed = [b["failure"] for b in runs if b["failure"]]
        nodes = len({node for b in runs for node in b["nodes"]})
        status = f"{len(failed)} FAILED ({failed[0]})" if failed else f"{nodes} node(s)"
        _line(f"{name}: {_fmt_s(walls[name])}, {status}", f"{rate:7.1f} /min", ratio(rate, base_rate))
    print("\n2. time to first task (start → first result line; baseline --local 1)")
    firsts = {name: _median([b["first"] for b in runs if not b["failure"]]) for name, runs in batches.items()}
    for name in batches:
        _line(name, _fmt_s(firsts[name]), ratio(firsts[name], firsts["local-1"]))
    print(f"\n3. client time per tool turn (bash `true`, median of {turns} turns, server clock; baseline: local pool)")
    medians = {key: _median([t["median"] for t in runs if not t["failure"]]) for key, runs in tools.items()}
    labels = {"pool": "serve, local pool", "ws_host": "serve, WebSocket tool host (same machine)",
              "ray_pool": "serve --placement ray, pool on the node", "ray_host": "serve --placement ray, Ray tool host"}  # fmt: skip
    for key, label in labels.items():
        failed = [t["failure"] for t in tools[key] if t["failure"]]
        if medians[key] != medians[key]:
            _line(label, "FAILED" if failed else "not measured", (failed or [""])[0][:200])
            continue
        extra = (medians[key] - medians["pool"]) * 1000
        note = f"  ({len(failed)} run(s) failed: {failed[0][:120]})" if failed else ""
        per_round = ", ".join(f"{t['median'] * 1000:.1f}" for t in tools[key] if not t["failure"])
        _line(
            label,
            f"{medians[key] * 1000:7.2f} ms",
            f"{ratio(medians[key], medians['pool'])}  extra {extra:+.2f} ms/call  [rounds: {per_round}]{note}",
        )
    print("\n4. idle memory (summed RSS; baseline: idle `pi-actors serve`, local placement)")
    _line(f"serve, local ({serve_procs} processes)", mib(serve_rss), "1.00x")
    _line(f"Ray cluster, head + 2 workers ({cluster_procs} processes)", mib(cluster_rss), ratio(cluster_rss, serve_rss))
    print(f"\ntotal {time.perf_counter() - t_all:.0f} s")
    if args.json:
        print(json.dumps({"batches": batches, "tools": tools, "serve_rss": serve_rss, "cluster_rss": cluster_rss}))


def cli(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m benchmarks.scale", description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="8 tasks per batch, 10 tool turns (else 12 and 30)")
    p.add_argument(
        "--rounds", type=int, default=0, help="rounds, each with every figure, in a turning order (default: 1 with --quick, else 2)"
    )
    p.add_argument("--json", action="store_true", help="also one JSON line with the figures")
    trio.run(main, p.parse_args(argv))


if __name__ == "__main__":
    cli()
