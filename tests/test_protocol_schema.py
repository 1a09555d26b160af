"""The wire contract in proto/: golden vectors byte for byte, and the CDDL kept in step with
the Structs (adding a field to a Struct without updating schema.cddl fails here)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import msgspec
import msgspec.inspect as mi
import pytest

from pi_actors.runtime._messages import MESSAGE_TYPES
from pi_actors.runtime.protocol import (
    ErrorInfo,
    FrameDecoder,
    RemoteProtocolError,
    decode_message,
    encode_frame,
    encode_message,
)

PROTO = Path(__file__).resolve().parent.parent / "proto"
VECTORS = json.loads((PROTO / "vectors" / "vectors.json").read_text(encoding="utf-8"))
CDDL = (PROTO / "schema.cddl").read_text(encoding="utf-8")


# -- golden vectors ------------------------------------------------------------------------------


def from_json(value):
    """A vector's JSON message as the tree the codec produces ({"$bytes": hex} -> bytes)."""
    if isinstance(value, dict):
        if set(value) == {"$bytes"}:
            return bytes.fromhex(value["$bytes"])
        return {k: from_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [from_json(v) for v in value]
    return value


def decode_frame(frame: bytes):
    decoder = FrameDecoder()
    decoder.feed(frame)
    payload = decoder.next_frame()
    assert payload is not None and decoder.next_frame() is None and decoder.at_boundary
    return decode_message(payload)


def as_tree(msg):
    return msgspec.to_builtins(msg, builtin_types=(bytes,))


def by_name(kind: str):
    return pytest.mark.parametrize("vector", VECTORS[kind], ids=[v["name"] for v in VECTORS[kind]])


@by_name("valid")
def test_valid_vectors_decode_to_their_message_and_encode_back_byte_for_byte(vector):
    frame = bytes.fromhex(vector["frame"])
    tree = from_json(vector["message"])
    assert as_tree(decode_frame(frame)) == tree
    msg = msgspec.convert(tree, MESSAGE_TYPES[tree["type"]], strict=True)
    encoded = encode_frame(encode_message(msg))
    assert encoded == frame, f"re-encoded as {encoded.hex()}"


@by_name("accepted")
def test_accepted_vectors_decode_to_their_message(vector):
    tree = from_json(vector["message"])
    assert as_tree(decode_frame(bytes.fromhex(vector["frame"]))) == tree


@by_name("invalid")
def test_invalid_vectors_are_rejected_as_invalid_request(vector):
    decoder = FrameDecoder()
    decoder.feed(bytes.fromhex(vector["frame"]))
    with pytest.raises(RemoteProtocolError) as info:
        while (payload := decoder.next_frame()) is not None:
            decode_message(payload)
        decoder.check_end()
    assert info.value.code == "invalid_request"


def test_the_vectors_cover_every_message_type():
    assert {v["message"]["type"] for v in VECTORS["valid"]} == set(MESSAGE_TYPES)


# -- the CDDL agrees with the Structs ------------------------------------------------------------

RULE = re.compile(r"^([a-z][a-z0-9-]*)\s*=\s*\{\n(.*?)^\}", re.MULTILINE | re.DOTALL)
MEMBER = re.compile(r"^(\?\s*)?([A-Za-z_][A-Za-z0-9_]*)\s*:\s*(.+?),?$")


def parse_cddl(text: str) -> tuple[dict[str, list[tuple[str, bool, str]]], list[str]]:
    """The map rules of ``text`` as {rule: [(key, optional, type)]}, and the `message` choice.

    Only the simple subset schema.cddl uses: `name = {` on one line, one member per line
    (`? key: type,`, or `* tstr => any,` for an open map, given as key "*"), `}` alone on a
    line; `;` starts a comment.
    """
    text = re.sub(r";[^\n]*", "", text)
    rules = {}
    for name, body in RULE.findall(text):
        members = []
        for line in body.splitlines():
            line = line.strip()
            if not line:
                continue
            if line.rstrip(",") == "* tstr => any":  # the map is open: unknown keys allowed
                members.append(("*", True, "any"))
                continue
            match = MEMBER.match(line)
            assert match, f"cannot parse member {line!r} of rule {name}"
            optional, key, type_ = match.groups()
            members.append((key, optional is not None, " ".join(type_.split())))
        rules[name] = members
    choice = re.search(r"^message\s*=\s*(.+)$", text, re.MULTILINE)
    assert choice, "schema.cddl has no `message = ...` rule"
    return rules, [alt.strip() for alt in choice.group(1).split("/")]


def rule_name(cls_or_tag: str) -> str:
    """hello_ok -> hello-ok; ErrorInfo -> error-info."""
    snake = re.sub(r"(?<!^)(?=[A-Z])", "_", cls_or_tag).lower()
    return snake.replace("_", "-")


def cddl_type(t: mi.Type) -> str:
    """The CDDL spelling schema.cddl uses for msgspec type ``t``."""
    if isinstance(t, mi.AnyType):
        return "payload"
    if isinstance(t, mi.IntType):
        assert (t.gt, t.lt, t.le, t.multiple_of) == (None,) * 4, t
        return "uint" if t.ge == 0 else "int"
    if isinstance(t, mi.StrType):
        assert (t.min_length, t.max_length, t.pattern) == (None,) * 3, t
        return "tstr"
    if isinstance(t, mi.BoolType):
        return "bool"
    if isinstance(t, mi.NoneType):
        return "null"
    if isinstance(t, mi.ListType):
        if t.min_length is None and t.max_length is None:
            occurrence = "*"
        else:
            occurrence = f"{t.min_length or ''}*{'' if t.max_length is None else t.max_length}"
        return f"[{occurrence} {cddl_type(t.item_type)}]"
    if isinstance(t, mi.UnionType):
        return " / ".join(cddl_type(x) for x in t.types)
    if isinstance(t, mi.StructType):
        return rule_name(t.cls.__name__)
    raise AssertionError(f"no CDDL spelling for {t!r}: extend cddl_type and schema.cddl")


def expected_members(cls) -> list[tuple[str, bool, str]]:
    info = mi.type_info(cls)
    members = []
    if info.tag is not None:
        members.append((info.tag_field, False, json.dumps(info.tag)))
    for field in info.fields:
        members.append((field.encode_name, not field.required, cddl_type(field.type)))
    if not info.forbid_unknown_fields:
        members.append(("*", True, "any"))
    return members


RULES, MESSAGE_CHOICE = parse_cddl(CDDL)


def test_the_message_rule_lists_every_message_type():
    assert MESSAGE_CHOICE == [rule_name(tag) for tag in MESSAGE_TYPES]


@pytest.mark.parametrize("cls", [*MESSAGE_TYPES.values(), ErrorInfo], ids=lambda c: c.__name__)
def test_every_struct_matches_its_cddl_rule_field_by_field(cls):
    config = cls.__struct_config__
    name = rule_name(config.tag if config.tag else cls.__name__)
    assert name in RULES, f"schema.cddl has no rule {name!r} for {cls.__name__}"
    assert RULES[name] == expected_members(cls)


def test_the_cddl_has_no_rule_without_a_struct():
    known = {rule_name(tag) for tag in MESSAGE_TYPES} | {rule_name("ErrorInfo")}
    assert set(RULES) == known


def test_the_cddl_parser_notices_a_missing_field():
    class Probe(msgspec.Struct, tag="cancel", tag_field="type", kw_only=True):
        id: int = msgspec.field(default=0)
        reason: str = ""

    assert RULES["cancel"] != expected_members(Probe)
