"""The exported page's own style sheet and script (inline in the page, nothing fetched).

Style: CSS variables for a light and a dark palette; the dark one applies when the system
prefers it, and the page's theme button forces either (``<html data-theme=...>``).

Script (runs offline, reads only the page): the sidebar's rows select a branch — the
conversation then shows the entries on the path from the root to the clicked row; the search
box hides rows whose row text and entry text do not contain the query (case-insensitive); the
filter buttons keep all rows, all but tool results, only user messages or only labelled
entries; one button opens (or closes) every thinking block; the theme button switches
light/dark. The tree's parent links come from the page's ``session-tree`` JSON block.
"""

from __future__ import annotations

__all__ = ["SCRIPT", "STYLE"]

STYLE = """
:root{--bg:#f7f7f5;--panel:#ffffff;--text:#1f2328;--muted:#6e7781;--border:#d0d7de;--accent:#0969da;
--user:#0969da;--assistant:#1a7f37;--tool:#9a6700;--error:#cf222e;--summary:#8250df;--code:#f0f1f3;
--add-bg:#dafbe1;--add:#116329;--del-bg:#ffebe9;--del:#82071e;--sel:#ddf4ff}
:root[data-theme=dark]{--bg:#0d1117;--panel:#161b22;--text:#e6edf3;--muted:#8d96a0;--border:#30363d;--accent:#4493f8;
--user:#4493f8;--assistant:#3fb950;--tool:#d29922;--error:#f85149;--summary:#a371f7;--code:#1f242c;
--add-bg:#12261e;--add:#56d364;--del-bg:#2d1214;--del:#ff7b72;--sel:#1f3147}
@media (prefers-color-scheme: dark){:root:not([data-theme=light]){--bg:#0d1117;--panel:#161b22;--text:#e6edf3;--muted:#8d96a0;
--border:#30363d;--accent:#4493f8;--user:#4493f8;--assistant:#3fb950;--tool:#d29922;--error:#f85149;--summary:#a371f7;
--code:#1f242c;--add-bg:#12261e;--add:#56d364;--del-bg:#2d1214;--del:#ff7b72;--sel:#1f3147}}
*{box-sizing:border-box}[hidden]{display:none!important}
html,body{margin:0;height:100%}
body{font:14px/1.55 system-ui,-apple-system,"Segoe UI",sans-serif;background:var(--bg);color:var(--text)}
#app{display:grid;grid-template-columns:minmax(220px,320px) 1fr;height:100vh}
#sidebar{border-right:1px solid var(--border);background:var(--panel);display:flex;flex-direction:column;min-height:0}
.sidebar-header{padding:.6em;border-bottom:1px solid var(--border);display:flex;flex-direction:column;gap:.4em}
#tree-search{width:100%;padding:.35em .5em;border:1px solid var(--border);border-radius:6px;background:var(--bg);color:var(--text)}
.filters{display:flex;gap:.3em;flex-wrap:wrap}
button{font:inherit;font-size:12px;padding:.15em .6em;border:1px solid var(--border);border-radius:6px;background:var(--bg);color:var(--text);cursor:pointer}
button.active{border-color:var(--accent);color:var(--accent)}
#tree{overflow:auto;flex:1;padding:.3em 0;font-size:12.5px}
.tree-row{padding:.15em .6em .15em calc(.6em + var(--depth,0) * 14px);white-space:nowrap;overflow:hidden;text-overflow:ellipsis;cursor:pointer;color:var(--muted)}
.tree-row:hover{background:var(--code)}.tree-row.on-path{color:var(--text)}.tree-row.current{background:var(--sel)}
.tree-role{font-weight:600}.tree-user{color:var(--user)}.tree-assistant{color:var(--assistant)}.tree-tool{color:var(--tool)}
.tree-summary{color:var(--summary)}.tree-label{color:var(--accent)}
#tree-status{padding:.4em .6em;border-top:1px solid var(--border);color:var(--muted);font-size:12px}
#content{overflow:auto;padding:1.2em 2em 4em}
#content>*{max-width:920px;margin-left:auto;margin-right:auto}
header{display:flex;justify-content:space-between;align-items:flex-start;gap:1em}.actions{display:flex;gap:.4em}
.stamp{font-size:11px;color:var(--muted);margin:.9em 0 -.7em .2em}
h1.title{font-size:1.4em;margin:.2em 0}
.info{display:grid;grid-template-columns:auto 1fr;gap:.1em 1em;font-size:12.5px;color:var(--muted);margin:.5em 0 1.5em}
.info b{font-weight:600;color:var(--text)}
.message{margin:.9em 0;padding:.7em 1em;border-radius:8px;background:var(--panel);border:1px solid var(--border);border-left:4px solid var(--border)}
.message.user{border-left-color:var(--user)}.message.assistant{border-left-color:var(--assistant)}
.message.tool{border-left-color:var(--tool)}.message.summary,.message.custom{border-left-color:var(--summary)}
.message.error,.tool-call.error{border-left-color:var(--error)}
.role{font-size:11px;font-weight:700;text-transform:uppercase;letter-spacing:.04em;color:var(--muted);margin-bottom:.3em}
.muted{color:var(--muted);font-weight:400;text-transform:none;letter-spacing:0}
.setting{font-size:12px;margin:.4em 0 .4em 1em}
.markdown h1{font-size:1.35em}.markdown h2{font-size:1.2em}.markdown h3,.markdown h4,.markdown h5,.markdown h6{font-size:1.05em}
.markdown>:first-child{margin-top:0}.markdown>:last-child{margin-bottom:0}
.markdown table{border-collapse:collapse;margin:.6em 0}
.markdown th,.markdown td{border:1px solid var(--border);padding:.25em .6em}.markdown th{background:var(--code)}
.markdown code{background:var(--code);padding:.1em .3em;border-radius:4px;font-size:.92em}
.markdown pre code{background:none;padding:0}
.markdown blockquote{margin:.5em 0;padding-left:1em;border-left:3px solid var(--border);color:var(--muted)}
a{color:var(--accent)}
pre{font:12.5px/1.45 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;background:var(--code);padding:.6em .8em;border-radius:6px;
white-space:pre-wrap;word-break:break-word;margin:.4em 0}
details>summary{cursor:pointer;color:var(--muted);font-size:12.5px}
details.thinking{margin:.4em 0;padding:.3em .6em;border-left:2px solid var(--border)}
.thinking-text{color:var(--muted);font-style:italic;margin-top:.3em}
.tool-call{margin:.6em 0;padding:.5em .7em;border:1px solid var(--border);border-left:3px solid var(--tool);border-radius:6px;background:var(--bg)}
.tool-header{font-family:ui-monospace,monospace;font-size:12.5px}
.tool-name{font-weight:700;color:var(--tool)}.tool-command{font-weight:600}.tool-path{color:var(--accent)}
.tool-error{color:var(--error)}.error-text{color:var(--error);margin-top:.4em}
.tool-diff{font:12.5px/1.45 ui-monospace,monospace;background:var(--code);border-radius:6px;padding:.4em 0;margin:.4em 0;overflow:auto}
.tool-diff>div{padding:0 .8em;white-space:pre-wrap}
.diff-add{background:var(--add-bg);color:var(--add)}.diff-del{background:var(--del-bg);color:var(--del)}.diff-ctx{color:var(--muted)}
.message-image{max-width:100%;max-height:400px;display:block;margin:.4em 0;border-radius:4px}
@media (max-width:760px){#app{grid-template-columns:1fr;grid-template-rows:40vh 1fr}#sidebar{border-right:0;border-bottom:1px solid var(--border)}}
"""

SCRIPT = """
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("session-tree").textContent);
  var parents = data.parents;
  var rows = Array.prototype.slice.call(document.querySelectorAll("#tree .tree-row"));
  var blocks = Array.prototype.slice.call(document.querySelectorAll("#messages [data-entry]"));
  var blockOf = {};
  blocks.forEach(function (b) { blockOf[b.getAttribute("data-entry")] = b; });
  var search = document.getElementById("tree-search");
  var status = document.getElementById("tree-status");
  var filter = "all";
  var haystack = new Map();
  rows.forEach(function (r) {
    var b = blockOf[r.getAttribute("data-id")];
    haystack.set(r, (r.textContent + " " + (b ? b.textContent : "")).toLowerCase());
  });

  function pathOf(id) {
    var seen = new Set();
    while (id !== null && id !== undefined && Object.prototype.hasOwnProperty.call(parents, id) && !seen.has(id)) {
      seen.add(id);
      id = parents[id];
    }
    return seen;
  }

  function select(id, scroll) {
    var path = pathOf(id);
    blocks.forEach(function (b) { b.hidden = !path.has(b.getAttribute("data-entry")); });
    rows.forEach(function (r) {
      r.classList.toggle("on-path", path.has(r.getAttribute("data-id")));
      r.classList.toggle("current", r.getAttribute("data-id") === id);
    });
    if (scroll && blockOf[id]) { blockOf[id].scrollIntoView({block: "start"}); }
  }

  function applyFilter() {
    var query = search.value.trim().toLowerCase();
    var shown = 0;
    rows.forEach(function (r) {
      var role = r.getAttribute("data-role");
      var kept = filter === "all" || (filter === "no-tools" && role !== "tool") || (filter === "user" && role === "user")
        || (filter === "labeled" && r.hasAttribute("data-labeled"));
      var visible = kept && (!query || haystack.get(r).indexOf(query) !== -1);
      r.hidden = !visible;
      if (visible) { shown += 1; }
    });
    status.textContent = shown === rows.length ? rows.length + " entries" : shown + " of " + rows.length + " entries";
  }

  rows.forEach(function (r) {
    r.addEventListener("click", function () { select(r.getAttribute("data-id"), true); });
    r.addEventListener("keydown", function (ev) { if (ev.key === "Enter") { select(r.getAttribute("data-id"), true); } });
  });
  search.addEventListener("input", applyFilter);
  Array.prototype.forEach.call(document.querySelectorAll(".filter-btn"), function (button) {
    button.addEventListener("click", function () {
      filter = button.getAttribute("data-filter");
      Array.prototype.forEach.call(document.querySelectorAll(".filter-btn"), function (b) { b.classList.toggle("active", b === button); });
      applyFilter();
    });
  });
  document.getElementById("toggle-thinking").addEventListener("click", function () {
    var all = Array.prototype.slice.call(document.querySelectorAll("details.thinking"));
    var open = all.some(function (d) { return !d.open; });
    all.forEach(function (d) { d.open = open; });
  });
  var root = document.documentElement;
  document.getElementById("theme-toggle").addEventListener("click", function () {
    var dark = root.getAttribute("data-theme") ? root.getAttribute("data-theme") === "dark"
      : window.matchMedia("(prefers-color-scheme: dark)").matches;
    root.setAttribute("data-theme", dark ? "light" : "dark");
  });
  applyFilter();
})();
"""
