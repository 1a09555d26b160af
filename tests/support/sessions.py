"""Session branches for the compaction tests: pi's JSONL v3 entry shapes, built root first."""

from __future__ import annotations

from datetime import UTC, datetime

from pi_actors.coding.session import iso_timestamp


class Branch:
    """Builds one branch of session entries (pi's JSONL v3 dict shapes), root first."""

    def __init__(self) -> None:
        self.entries: list[dict] = []
        self.ms = 1_700_000_000_000

    def add(self, kind: str, **fields) -> dict:
        self.ms += 1000
        entry = {
            "type": kind,
            "id": f"e{len(self.entries):03d}",
            "parentId": self.entries[-1]["id"] if self.entries else None,
            "timestamp": iso_timestamp(datetime.fromtimestamp(self.ms / 1000, UTC)),
            **fields,
        }
        self.entries.append(entry)
        return entry

    def message(self, message: dict) -> dict:
        return self.add("message", message={**message, "timestamp": self.ms + 1000})

    def user(self, text: str) -> dict:
        return self.message({"role": "user", "content": text})

    def assistant(self, text: str = "", *, calls=(), total: int = 0, stop: str = "stop", error: str | None = None) -> dict:
        content = [{"type": "text", "text": text}] if text else []
        content += [{"type": "toolCall", "id": cid, "name": name, "arguments": args} for cid, name, args in calls]
        message = {
            "role": "assistant", "content": content, "api": "openai-completions", "provider": "fake",
            "model": "fake-model", "usage": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0,
                                             "totalTokens": total, "cost": {"input": 0, "output": 0, "cacheRead": 0,
                                                                            "cacheWrite": 0, "total": 0}},
            "stopReason": stop if not calls else "toolUse",
        }
        if error is not None:
            message["stopReason"], message["errorMessage"] = "error", error
        return self.message(message)

    def result(self, call_id: str, name: str, text: str) -> dict:
        return self.message({"role": "toolResult", "toolCallId": call_id, "toolName": name,
                             "content": [{"type": "text", "text": text}], "isError": False})

    def compaction(self, summary: str, first_kept: str, *, details=None, from_hook: bool = False) -> dict:
        fields = {"summary": summary, "firstKeptEntryId": first_kept, "tokensBefore": 123, "fromHook": from_hook}
        if details is not None:
            fields["details"] = details
        return self.add("compaction", **fields)


def roles(messages: list[dict]) -> list[str]:
    return [m["role"] for m in messages]


def tool_session() -> Branch:
    b = Branch()
    b.user("a" * 400)                                              # 0: 100 tokens
    b.assistant("b" * 400, calls=[("c1", "read", {"path": "x.py"})])  # 1
    b.result("c1", "read", "r" * 4000)                             # 2: 1000 tokens
    b.assistant("d" * 400)                                         # 3: 100 tokens
    b.user("e" * 400)                                              # 4: 100 tokens
    b.assistant("f" * 400)                                         # 5: 100 tokens
    return b
