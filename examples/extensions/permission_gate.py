"""A permission gate: asks before a bash command that deletes recursively (``rm -rf``) or
reaches the network (curl, wget, ssh, scp, nc, ...). Without a UI to ask (``-p``, json
mode), such a command is blocked.

    pi-actors -e examples/extensions/permission_gate.py --mode rpc
"""

import re

DANGEROUS = re.compile(
    r"\brm\s+(-[a-zA-Z]*[rR][a-zA-Z]*f|-[a-zA-Z]*f[a-zA-Z]*[rR]|--recursive\s+--force|--force\s+--recursive)\b"
    r"|\b(curl|wget|ssh|scp|sftp|rsync|nc|ncat|telnet|ftp)\b"
)


def register(pi):
    async def on_tool_call(event, ctx):
        if event["toolName"] != "bash":
            return None
        command = str(event["input"].get("command", ""))
        if not DANGEROUS.search(command):
            return None
        if await ctx.ui.confirm("Allow this command?", command):
            return None
        return {"block": True, "reason": f"Blocked by the permission gate: {command}"}

    pi.on("tool_call", on_tool_call)
