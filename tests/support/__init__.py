"""Helpers shared by several test modules (no tests here).

Test modules import from these modules, never from each other; fixtures shared by many
modules live in ``tests/conftest.py``.

- ``agent_loop`` — driving the agent loop with a scripted stream, and its event invariants.
- ``providers`` — the provider tests' recorder, models and one-call runner.
- ``sessions`` — building session branches (pi's JSONL v3 entries) for compaction tests.
- ``sandbox`` — the real tool pool in the test's loop, and process inspection.
- ``wire`` — raw protocol exchanges and line readers for server and CLI tests.
- ``rpc`` — ``RpcClient``, a client of ``pi-actors --mode rpc`` as pi's RpcClient drives it.
- ``prompts`` — running one prompt through a coordinator link.
- ``chromium`` — headless Chromium over the DevTools protocol, for tests that look at a page.
- ``web`` — ``pi-actors serve --web`` as a process, a small HTTP client, signing in.
"""
