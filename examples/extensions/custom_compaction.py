"""A custom compaction: instead of asking the model for a summary, keep a list of what the
user asked for (cheap, deterministic). Try it with ``/compact`` in a long session.

    pi-actors -e examples/extensions/custom_compaction.py
"""


def _text(message):
    content = message.get("content")
    if isinstance(content, str):
        return content
    return " ".join(block.get("text", "") for block in content or [] if block.get("type") == "text")


def register(pi):
    def on_before_compact(event, ctx):
        messages = event["messagesToSummarize"] + event.get("turnPrefixMessages", [])
        asks = [_text(m) for m in messages if m.get("role") == "user"]
        lines = "\n".join(f"- {ask[:200]}" for ask in asks if ask)
        return {"compaction": {"summary": f"The user asked, in order:\n{lines}"}}

    pi.on("session_before_compact", on_before_compact)
