"""The application protocol in proto/ is generated from the declarations in
pi_actors/protocol/: the method CDDL, the PROTOCOL.md tables and the example-call vectors
match the code, every example call round-trips through its Struct byte for byte, and the
schema-evolution rule holds against the committed baseline."""

from __future__ import annotations

import json

import msgspec
import pytest

from pi_actors.protocol import schema
from pi_actors.runtime.protocol import Call, decode_message, encode_message

INTERFACES = schema.all_interfaces()
BASELINE = json.loads((schema.PROTO_DIR / "vectors" / "methods.json").read_text(encoding="utf-8"))
METHODS = {f"{iface.name}.{m.name}": m for iface in INTERFACES for m in iface}


def test_the_method_cddl_is_generated_from_the_declarations():
    assert (schema.PROTO_DIR / "methods.cddl").read_text(encoding="utf-8") == schema.cddl_text(INTERFACES), (
        "proto/methods.cddl is out of date: python -m pi_actors.protocol.schema --write"
    )


def test_the_protocol_md_method_tables_are_generated_from_the_declarations():
    text = (schema.PROTO_DIR / "PROTOCOL.md").read_text(encoding="utf-8")
    assert schema.method_tables(INTERFACES) in text, "PROTOCOL.md §13 is out of date: python -m pi_actors.protocol.schema --write"


def test_the_vectors_are_generated_from_the_declarations():
    assert schema.vectors(INTERFACES) == BASELINE, "proto/vectors/methods.json is out of date: python -m pi_actors.protocol.schema --write"


def test_every_method_is_documented():
    undocumented = sorted(name for name, m in METHODS.items() if not m.doc.strip())
    assert not undocumented, f"methods without doc=: {undocumented}"


@pytest.mark.parametrize("vector", BASELINE["calls"], ids=[v["name"] for v in BASELINE["calls"]])
def test_an_example_call_decodes_to_its_arguments_and_encodes_back_byte_for_byte(vector):
    method = METHODS[vector["name"]]
    frame = bytes.fromhex(vector["cbor"])
    call = decode_message(frame)
    assert isinstance(call, Call) and call.method == method.name
    typed = msgspec.convert(call.args, method.args, strict=True)
    again = encode_message(Call(id=call.id, method=method.name, args=msgspec.to_builtins(typed)))
    assert again == frame


def test_the_declarations_keep_the_schema_evolution_rule():
    problems = schema.evolution_problems(BASELINE, schema.vectors(INTERFACES))
    assert not problems, "\n".join(problems)


def test_the_evolution_check_names_a_retyped_field_a_removed_field_and_a_new_required_field():
    current = schema.vectors(INTERFACES)
    name, shape = next((n, s) for n, s in current["structs"].items() if s["fields"])
    key = next(iter(shape["fields"]))
    retyped = json.loads(json.dumps(current))
    retyped["structs"][name]["fields"][key]["type"] = "something-else"
    assert any(f"field {key} changed type" in p for p in schema.evolution_problems(current, retyped))
    removed = json.loads(json.dumps(current))
    del removed["structs"][name]["fields"][key]
    assert any(f"field {key} disappeared" in p for p in schema.evolution_problems(current, removed))
    added = json.loads(json.dumps(current))
    added["structs"][name]["fields"]["brandNew"] = {"type": "tstr", "required": True}
    assert any("new field brandNew has no default" in p for p in schema.evolution_problems(current, added))
    optional = json.loads(json.dumps(current))
    optional["structs"][name]["fields"]["brandNew"] = {"type": "tstr", "required": False}
    assert schema.evolution_problems(current, optional) == []
