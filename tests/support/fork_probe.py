"""A plain program that forks an actor (``runtime.fork_actor``), for ``test_runtime_fork``.

``python fork_probe.py MODE ENTRY_DIR``: forks the actor ``probe`` (entry
``fork_probe_entry:report``, found in ENTRY_DIR) with this process's environment minus
``PROBE_SECRET``, holding a file of its own open across the fork, then:

- ``report``: boots it and prints, as JSON lines, the child's pid and what the actor reports;
- ``abandon``: gives it up before its boot, prints its pid and its exit status;
- ``orphan``: prints its pid and dies without booting or giving it up.
"""

from __future__ import annotations

import json
import os
import sys

import trio

from pi_actors.runtime import fork_actor, start_actor


def main() -> None:
    mode, entry_dir = sys.argv[1], sys.argv[2]
    held = open(__file__, "rb")  # noqa: SIM115 - a descriptor of ours, open across the fork
    env = {k: v for k, v in os.environ.items() if k != "PROBE_SECRET"}
    actor = fork_actor(name="probe", links=("report",), env=env, preload=("pi_actors.actors.tool_pool",) if mode == "report" else ())
    print(json.dumps({"pid": actor.process.pid, "held": os.path.realpath(__file__)}), flush=True)
    if mode == "abandon":
        actor.abandon()
        print(json.dumps({"returncode": actor.process.returncode}), flush=True)
        return
    if mode == "orphan":
        os._exit(0)

    async def run() -> None:
        report = trio.SocketStream(trio.socket.from_stdlib_socket(actor.take_end("report")))
        async with trio.open_nursery() as nursery:
            process = await start_actor(nursery, name="probe", entry="fork_probe_entry:report", links={},
                                        prestarted=actor, import_paths=(entry_dir,))  # fmt: skip
            data = b""
            while chunk := await report.receive_some():
                data += chunk
            print(data.decode(), flush=True)
            await process.exited.wait()
            print(json.dumps({"exit": process.returncode}), flush=True)

    trio.run(run)
    held.close()


if __name__ == "__main__":
    main()
