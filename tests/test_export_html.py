"""The exported page's logic, in process: safe Markdown, the session tree of the sidebar,
tool results shown with their calls, and pi's default file name. (What the page looks like
in a browser is tests/test_export_html_browser.py.)"""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser

from hypothesis import given, settings
from hypothesis import strategies as st

from pi_actors.coding.export import default_export_name, markdown_html, render_html, tree_rows

_MARKDOWN_TAGS = {
    "p", "h1", "h2", "h3", "h4", "h5", "h6", "em", "strong", "s", "code", "pre", "blockquote", "ul", "ol", "li",
    "a", "hr", "br", "table", "thead", "tbody", "tr", "th", "td",
}  # fmt: skip


def _tokens(pieces: list[str]) -> st.SearchStrategy[str]:
    """Strings made of ``pieces`` (characters and hostile fragments) in any order."""
    return st.lists(st.sampled_from(pieces), max_size=60).map("".join)


class _Elements(HTMLParser):
    """Every start tag of a document with its attributes, and the text of its script elements."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.scripts: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        self._in_script = tag == "script"
        if self._in_script:
            self.scripts.append("")

    def handle_endtag(self, tag):
        self._in_script = False

    def handle_data(self, data):
        if self._in_script:
            self.scripts[-1] += data


def _elements(markup: str) -> _Elements:
    parser = _Elements()
    parser.feed(markup)
    parser.close()
    return parser


def _assert_inert(parser: _Elements) -> None:
    for tag, attrs in parser.tags:
        assert not any(name.startswith("on") for name in attrs), (tag, attrs)
        if tag == "a" and "href" in attrs:
            assert re.match(r"(?i)(https?|mailto):", attrs["href"] or ""), attrs
        if tag == "img":
            assert (attrs.get("src") or "").startswith("data:image/"), attrs


def test_markdown_renders_headings_tables_and_code_but_no_html_from_the_text():
    out = markdown_html(
        "# Title <b>x</b>\n\n| a | b |\n|---|---|\n| 1 | <i>2</i> |\n\n```py\n</pre><script>alert(1)</script>\n```\n\n"
        "[js](javascript:alert(1)) [rel](./x) [ok](https://e.org) [mail](mailto:a@b.c) ![img](https://e.org/i.png) ~~old~~"
    )
    assert "<h1>Title &lt;b&gt;x&lt;/b&gt;</h1>" in out and "<th>a</th>" in out and "<td>&lt;i&gt;2&lt;/i&gt;</td>" in out
    assert "&lt;/pre&gt;&lt;script&gt;" in out and "<script" not in out and "<img" not in out and "<s>old</s>" in out
    # An image is not loaded: it stays a link to its address.
    assert re.findall(r'href="([^"]*)"', out) == ["https://e.org", "mailto:a@b.c", "https://e.org/i.png"]
    assert "[js](javascript:alert(1))" in out and "[rel](./x)" in out
    assert markdown_html("[empty]()") == '<p><a rel="noopener noreferrer nofollow" target="_blank">empty</a></p>\n'


@settings(max_examples=200, deadline=None)
@given(_tokens(list("<>&\"'`[]()!*_#|-:/\\ \nabc") + ["javascript:", "<script>", "](", "<img ", "onerror=", "http://", "|---|"]))
def test_markdown_of_hostile_text_yields_only_inert_markup(text):
    parser = _elements(markdown_html(text))
    assert {tag for tag, _ in parser.tags} <= _MARKDOWN_TAGS
    _assert_inert(parser)


def _entry(kind: str, ident: str, parent: str | None, **fields) -> dict:
    return {"type": kind, "id": ident, "parentId": parent, "timestamp": "2026-01-01T00:00:00.000Z", **fields}


def _user(ident: str, parent: str | None, text: str) -> dict:
    return _entry("message", ident, parent, message={"role": "user", "content": text, "timestamp": 1})


def _assistant(ident: str, parent: str | None, text: str = "", calls=()) -> dict:
    content = ([{"type": "text", "text": text}] if text else []) + [
        {"type": "toolCall", "id": cid, "name": name, "arguments": args} for cid, name, args in calls
    ]
    message = {"role": "assistant", "content": content, "provider": "p", "model": "m", "stopReason": "stop", "timestamp": 2}
    return _entry("message", ident, parent, message=message)


def _result(ident: str, parent: str, call_id: str, name: str, text: str, **extra) -> dict:
    message = {"role": "toolResult", "toolCallId": call_id, "toolName": name, "content": [{"type": "text", "text": text}],
               "isError": False, "timestamp": 3, **extra}  # fmt: skip
    return _entry("message", ident, parent, message=message)


def test_the_tree_indents_only_at_branch_points_and_skips_bookkeeping_entries():
    entries = [
        _entry("model_change", "m", None, provider="p", modelId="m"),
        _user("u1", "m", "first"),
        _assistant("a1", "u1", "answer"),
        _user("u2", "a1", "left"),
        _assistant("a2", "u2", "left answer"),
        _user("u3", "a1", "right"),
        _entry("label", "l", "u3", targetId="u3", label="mine"),
    ]
    rows = tree_rows(entries)
    assert [(r.id, r.parent, r.depth) for r in rows] == [
        ("u1", None, 0), ("a1", "u1", 0), ("u2", "a1", 1), ("a2", "u2", 1), ("u3", "a1", 1)
    ]  # fmt: skip
    assert rows[-1].label == "mine" and rows[0].preview == "first"


def test_a_session_tree_with_a_cycle_or_a_missing_parent_still_renders():
    entries = [_user("a", "b", "one"), _user("b", "a", "two"), _user("c", "gone", "three")]
    page = render_html({"id": "s"}, entries)
    assert page.count('class="tree-row') == 3 and "three" in page


def test_each_tool_result_is_shown_with_its_own_call_even_when_call_ids_repeat():
    # The scripted model (and some providers) reuse ids such as "call_1" in every message.
    entries = [
        _user("u", None, "go"),
        _assistant("a1", "u", calls=[("call_1", "bash", {"command": "cat notes.txt"})]),
        _result("r1", "a1", "call_1", "bash", "alpha"),
        _assistant("a2", "r1", calls=[("call_1", "edit", {"path": "notes.txt", "oldText": "a", "newText": "b"})]),
        _result("r2", "a2", "call_1", "edit", "Successfully replaced text.", details={"diff": " 1 x\n-2 a\n+2 b"}),
    ]
    page = render_html({"id": "s"}, entries)
    bash = page[page.index('data-tool="bash"') : page.index('data-tool="edit"')]
    assert "alpha" in bash
    edit = page[page.index('data-tool="edit"') :]
    assert '<div class="diff-del">-2 a</div>' in edit and '<div class="diff-add">+2 b</div>' in edit and "alpha" not in edit
    assert 'data-entry="r1"' not in page and 'data-entry="r2"' not in page  # not shown a second time


def test_the_page_shows_the_leafs_branch_and_hides_the_others_until_chosen():
    entries = [_user("u1", None, "root"), _user("x", "u1", "other branch"), _user("y", "u1", "this branch")]
    page = render_html({"id": "s"}, entries, "y")
    assert '<div class="entry" data-entry="x" hidden>' in page and '<div class="entry" data-entry="y">' in page
    assert re.search(r'class="tree-row on-path current" data-id="y"', page)


_hostile = _tokens(list("<>&\"'`/\\ \n") + ["</script>", "<!--", "javascript:", "<img onerror=x>", "a"])


@settings(max_examples=60, deadline=None)
@given(text=_hostile, ident=_hostile, name=_hostile)
def test_a_page_of_hostile_session_text_has_only_its_own_scripts_and_inert_markup(text, ident, name):
    entries = [
        _user(ident or "u", None, text),
        _assistant("a", ident or "u", text, calls=[("c", name, {"command": text, "path": text})]),
        _result("r", "a", "c", name, text, isError=True),
        _entry("session_info", "n", "r", name=text),
        _entry("compaction", "k", "r", summary=text, tokensBefore=5),
    ]
    page = render_html({"id": text, "cwd": text, "timestamp": text}, entries)
    parser = _elements(page)
    _assert_inert(parser)
    assert [tag for tag, attrs in parser.tags if tag == "script"] == ["script", "script"]
    data = json.loads(parser.scripts[0])
    assert set(data["parents"]) == {ident or "u", "a", "r", "n", "k"}
    assert parser.scripts[1].lstrip().startswith("(function () {")


def test_the_default_file_name_is_pis():
    assert default_export_name("/x/sessions/--w--/2026-01-01T00-00-00-000Z_abc.jsonl") == "pi-session-2026-01-01T00-00-00-000Z_abc.html"
    assert default_export_name(None, "abc") == "pi-session-abc.html"
