"""The application protocol's documents, generated from the Struct declarations.

``python -m pi_actors.protocol.schema`` checks that the generated files in ``proto/`` match the
declarations (exit status 1 and a diff summary if not); ``--write`` regenerates them:

- ``proto/methods.cddl`` — every argument, chunk and result Struct of every actor as CDDL
  (RFC 8610), and one rule per method;
- the method tables of ``proto/PROTOCOL.md`` (between the ``BEGIN GENERATED`` and ``END
  GENERATED`` markers of §13);
- ``proto/vectors/methods.json`` — per method, an example of its arguments with the exact CBOR
  bytes of that call, and the *shape* of every Struct (field, type, required), which is the
  baseline of the schema-evolution check.

Schema evolution (PROTOCOL §9), checked by ``evolution_problems`` against the committed
baseline before anything is written: a Struct or a method may be added; a field may be added
only with a default; no field, Struct or method may disappear or change type; an optional field
may not become required. ``--write`` refuses a breaking change unless ``--allow-breaking`` is
given (which is what a new protocol version is for).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import msgspec
import msgspec.inspect as mi

from ..runtime import Interface, Method
from ..runtime.protocol import Call, encode_message

__all__ = [
    "PROTO_DIR",
    "all_interfaces",
    "cddl_text",
    "evolution_problems",
    "method_tables",
    "vectors",
    "main",
]

PROTO_DIR = Path(__file__).resolve().parents[2] / "proto"
BEGIN = "<!-- BEGIN GENERATED: method tables (python -m pi_actors.protocol.schema --write) -->"
END = "<!-- END GENERATED -->"


def all_interfaces() -> list[Interface]:
    """Every actor interface of the application protocol, in document order."""
    from . import coordinator, extension_host, pool, provider, server, store

    return [
        coordinator.COORDINATOR,
        provider.PROVIDER,
        pool.POOL,
        pool.WORKER,
        pool.TOOL_HOST,
        store.STORE,
        server.SERVER,
        server.TOOL_PROXY,
        extension_host.EXTENSION_HOST,
        extension_host.EXTENSION_CLIENT,
    ]


# -- type walking ------------------------------------------------------------------------------


#: CDDL names of the types spelled without looking inside them.
_CDDL_NAMES: dict[type, str] = {
    mi.AnyType: "any",
    mi.NoneType: "null",
    mi.BoolType: "bool",
    mi.FloatType: "float",
    mi.StrType: "tstr",
    mi.BytesType: "bstr",
    mi.ByteArrayType: "bstr",
}

#: Example values of the types that need no look inside them (see ``_example``).
_SIMPLE_EXAMPLES: dict[type, Any] = {
    mi.AnyType: None,
    mi.NoneType: None,
    mi.BoolType: True,
    mi.FloatType: 1.5,
    mi.BytesType: b"\x00",
    mi.ByteArrayType: b"\x00",
}


class _Walker:
    """Collects every Struct reachable from the methods and spells types in CDDL."""

    def __init__(self) -> None:
        self.structs: dict[str, mi.StructType] = {}
        self._names: dict[type, str] = {}

    def name_of(self, cls: type) -> str:
        if cls in self._names:
            return self._names[cls]
        base = cls.__name__
        name = base
        taken = set(self._names.values())
        if name in taken:
            name = f"{cls.__module__.rsplit('.', 1)[-1]}-{base}"
        self._names[cls] = name
        return name

    def spell(self, t: mi.Type) -> str:
        simple = _CDDL_NAMES.get(type(t))
        if simple is not None:
            return simple
        if isinstance(t, mi.IntType):
            return "uint" if (t.ge is not None and t.ge >= 0) else "int"
        if isinstance(t, mi.LiteralType):
            return " / ".join(json.dumps(v) for v in t.values)
        if isinstance(t, (mi.ListType, mi.VarTupleType, mi.SetType, mi.FrozenSetType)):
            return f"[* {self._group(t.item_type)}]"
        if isinstance(t, mi.TupleType):
            return "[" + ", ".join(self.spell(x) for x in t.item_types) + "]"
        if isinstance(t, mi.DictType):
            return f"{{* {self.spell(t.key_type)} => {self._group(t.value_type)}}}"
        if isinstance(t, mi.UnionType):
            return " / ".join(self._group(x) for x in t.types)
        if isinstance(t, mi.StructType):
            name = self.name_of(t.cls)
            if name not in self.structs:
                self.structs[name] = t
                for f in t.fields:
                    self.spell(f.type)
            return name
        if isinstance(t, (mi.DataclassType, mi.TypedDictType)):
            return "{* tstr => any}"
        raise TypeError(f"no CDDL spelling for {t!r}")

    def _group(self, t: mi.Type) -> str:
        text = self.spell(t)
        return f"({text})" if " / " in text else text

    def struct_rule(self, name: str, t: mi.StructType) -> str:
        lines = [f"{name} = {{"]
        if t.tag_field is not None:
            lines.append(f"  {t.tag_field}: {json.dumps(t.tag)},")
        for f in t.fields:
            mark = "" if f.required else "? "
            lines.append(f"  {mark}{f.encode_name}: {self.spell(f.type)},")
        lines.append("  * tstr => any,")
        lines.append("}")
        return "\n".join(lines)


def _method_id(iface: Interface, method: Method[Any, Any, Any]) -> str:
    return f"{iface.name}.{method.name}"


def cddl_text(interfaces: list[Interface]) -> str:
    """``proto/methods.cddl``: one rule per method (args, chunk, result) and per Struct."""
    walker = _Walker()
    method_rules: list[str] = []
    for iface in interfaces:
        method_rules.append(f"; -- {iface.name} " + "-" * max(0, 80 - len(iface.name)))
        for m in iface:
            mid = _method_id(iface, m)
            method_rules.append(f"{mid}.args = {walker.spell(mi.type_info(m.args))}")
            if m.chunk is not None:
                method_rules.append(f"{mid}.chunk = {walker.spell(mi.type_info(m.chunk))}")
            method_rules.append(f"{mid}.result = {walker.spell(mi.type_info(m.result))}")
    head = [
        "; pi-actors application protocol: every actor method (RFC 8610 CDDL), over envelope versions 1-2.",
        ";",
        "; GENERATED from pi_actors/protocol/*.py by `python -m pi_actors.protocol.schema --write`;",
        "; tests/test_protocol_methods.py fails when it drifts. A method `<actor>.<name>` is a",
        "; `call` whose `args` is `<actor>.<name>.args`, whose chunks' `data` are `.chunk` and whose",
        "; result value is `.result` (PROTOCOL.md §6, §13). Keys are camelCase; an optional key (`?`)",
        "; is left out when it holds its default; receivers ignore unknown keys (`* tstr => any`).",
        "",
    ]
    structs = [walker.struct_rule(name, t) for name, t in sorted(walker.structs.items())]
    return "\n".join(head + method_rules + [""] + structs) + "\n"


# -- PROTOCOL.md tables ------------------------------------------------------------------------


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def method_tables(interfaces: list[Interface]) -> str:
    """The generated part of PROTOCOL.md §13: one table per actor."""
    walker = _Walker()
    out: list[str] = [BEGIN, ""]
    for iface in interfaces:
        out.append(f"### {iface.name}")
        out.append("")
        if iface.doc:
            out.append(_cell(iface.doc))
            out.append("")
        out.append("| method | args | chunks | result | errors | meaning |")
        out.append("|---|---|---|---|---|---|")
        for m in sorted(iface, key=lambda m: m.name):
            args = walker.spell(mi.type_info(m.args))
            chunk = walker.spell(mi.type_info(m.chunk)) if m.chunk is not None else "—"
            result = walker.spell(mi.type_info(m.result))
            errors = "; ".join(f"`{code}`: {_cell(when)}" for code, when in m.errors.items()) or "—"
            coop = " (cooperative cancel)" if m.cooperative else ""
            out.append(f"| `{m.name}` | `{args}` | `{_cell(chunk)}` | `{result}` | {errors} | {_cell(m.doc)}{coop} |")
        out.append("")
    out.append(END)
    return "\n".join(out)


def _replace_tables(protocol_md: str, tables: str) -> str:
    start, end = protocol_md.find(BEGIN), protocol_md.find(END)
    if start < 0 or end < 0:
        raise ValueError("proto/PROTOCOL.md has no BEGIN/END GENERATED markers")
    return protocol_md[:start] + tables + protocol_md[end + len(END) :]


# -- vectors and the evolution baseline --------------------------------------------------------


def _example(t: mi.Type, depth: int = 0) -> Any:
    """A small valid value of type ``t`` (required fields only), for the golden vectors."""
    if type(t) in _SIMPLE_EXAMPLES:
        return _SIMPLE_EXAMPLES[type(t)]
    if isinstance(t, mi.IntType):
        return max(1, t.ge or 0)
    if isinstance(t, mi.StrType):
        return "x" * max(1, t.min_length or 0)
    if isinstance(t, mi.LiteralType):
        return t.values[0]
    if isinstance(t, (mi.ListType, mi.VarTupleType, mi.SetType, mi.FrozenSetType)):
        return []
    if isinstance(t, mi.TupleType):
        return [_example(x, depth + 1) for x in t.item_types]
    if isinstance(t, (mi.DictType, mi.DataclassType, mi.TypedDictType)):
        return {}
    if isinstance(t, mi.UnionType):
        simple = [x for x in t.types if not isinstance(x, mi.NoneType)]
        return _example((simple or t.types)[0], depth + 1)
    if isinstance(t, mi.StructType):
        tree: dict[str, Any] = {}
        if t.tag_field is not None:
            tree[t.tag_field] = t.tag
        for f in t.fields:
            if f.required:
                tree[f.encode_name] = _example(f.type, depth + 1)
        return tree
    raise TypeError(f"no example for {t!r}")


def _shape(t: mi.StructType, walker: _Walker) -> dict[str, Any]:
    fields = {f.encode_name: {"type": walker.spell(f.type), "required": f.required} for f in t.fields}
    return {"tag": t.tag, "fields": fields}


def vectors(interfaces: list[Interface]) -> dict[str, Any]:
    """``proto/vectors/methods.json``: example calls with their bytes, and every Struct's shape."""
    walker = _Walker()
    calls: list[dict[str, Any]] = []
    methods: dict[str, dict[str, Any]] = {}
    for iface in interfaces:
        for m in iface:
            mid = _method_id(iface, m)
            # The example must be valid; the vector holds its canonical encoding (what an
            # encoder writes for the typed value: defaults the Struct always writes included).
            args = msgspec.to_builtins(msgspec.convert(_example(mi.type_info(m.args)), m.args, strict=True))
            frame = encode_message(Call(id=1, method=m.name, args=args))
            calls.append({"name": mid, "args": args, "cbor": frame.hex()})
            methods[mid] = {
                "args": walker.spell(mi.type_info(m.args)),
                "chunk": walker.spell(mi.type_info(m.chunk)) if m.chunk is not None else None,
                "result": walker.spell(mi.type_info(m.result)),
            }
    shapes = {name: _shape(t, walker) for name, t in sorted(walker.structs.items())}
    return {"calls": calls, "methods": methods, "structs": shapes}


def evolution_problems(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """Every way ``new`` breaks the schema-evolution rule against the baseline ``old``."""
    problems: list[str] = []
    for mid, sig in old.get("methods", {}).items():
        now = new["methods"].get(mid)
        if now is None:
            problems.append(f"method {mid} disappeared")
            continue
        for part in ("args", "chunk", "result"):
            if sig.get(part) != now.get(part):
                problems.append(f"method {mid}: {part} changed from {sig.get(part)} to {now.get(part)}")
    for name, shape in old.get("structs", {}).items():
        now = new["structs"].get(name)
        if now is None:
            problems.append(f"struct {name} disappeared")
            continue
        if shape.get("tag") != now.get("tag"):
            problems.append(f"struct {name}: tag changed from {shape.get('tag')!r} to {now.get('tag')!r}")
        for key, field in shape["fields"].items():
            cur = now["fields"].get(key)
            if cur is None:
                problems.append(f"struct {name}: field {key} disappeared")
            elif cur["type"] != field["type"]:
                problems.append(f"struct {name}: field {key} changed type from {field['type']} to {cur['type']}")
            elif cur["required"] and not field["required"]:
                problems.append(f"struct {name}: field {key} became required")
        for key, cur in now["fields"].items():
            if key not in shape["fields"] and cur["required"]:
                problems.append(f"struct {name}: new field {key} has no default")
    return problems


# -- command line ------------------------------------------------------------------------------


def _generated(interfaces: list[Interface], proto: Path) -> dict[Path, str]:
    protocol_md = (proto / "PROTOCOL.md").read_text(encoding="utf-8")
    return {
        proto / "methods.cddl": cddl_text(interfaces),
        proto / "PROTOCOL.md": _replace_tables(protocol_md, method_tables(interfaces)),
        proto / "vectors" / "methods.json": json.dumps(vectors(interfaces), indent=1, sort_keys=True) + "\n",
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pi_actors.protocol.schema", description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help="regenerate the files in proto/")
    parser.add_argument("--allow-breaking", action="store_true", help="write even if the schema-evolution rule is broken")
    parser.add_argument("--proto", type=Path, default=PROTO_DIR)
    opts = parser.parse_args(argv)
    interfaces = all_interfaces()
    files = _generated(interfaces, opts.proto)
    baseline_path = opts.proto / "vectors" / "methods.json"
    if baseline_path.exists():
        problems = evolution_problems(json.loads(baseline_path.read_text(encoding="utf-8")), vectors(interfaces))
        if problems and not opts.allow_breaking:
            for problem in problems:
                print(f"schema evolution: {problem}", file=sys.stderr)
            return 1
    stale = [path for path, text in files.items() if not path.exists() or path.read_text(encoding="utf-8") != text]
    if opts.write:
        for path in stale:
            path.write_text(files[path], encoding="utf-8")
            print(f"wrote {path}")
        return 0
    for path in stale:
        print(f"out of date: {path} (run python -m pi_actors.protocol.schema --write)", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
