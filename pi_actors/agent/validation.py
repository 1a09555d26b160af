"""Tool-argument validation: the JSON-Schema subset tool schemas use, with AJV-style coercion.

``validate_tool_arguments(tool, arguments)`` checks the model's arguments against
``tool.parameters`` and returns a **coerced deep copy** (the input is never mutated), or raises
:class:`ToolArgumentsError` whose message has pi's exact shape (pi's packages/ai, docs/architecture.md §7)::

    Validation failed for tool "<name>":
      - <path>: <message>

    Received arguments:
    <the original arguments as JSON, indented by 2>

``<path>`` is the JSON-pointer path of the offending value without its leading ``/`` (``b``,
``b/0/c``); an empty path reads as the missing property's name for a ``required`` error and
``root`` otherwise. The messages are AJV's (``must be number``, ``must have required property
'a'``, ``must NOT have additional properties``, ``must be equal to one of the allowed values``).

Supported keywords: ``type`` (one or a list), ``properties``, ``required``,
``additionalProperties`` (bool or schema), ``enum``, ``const``, ``items`` (schema or tuple),
``minimum``/``maximum``/``exclusiveMinimum``/``exclusiveMaximum``/``multipleOf``,
``minLength``/``maxLength``/``pattern``, ``minItems``/``maxItems``, ``anyOf``/``oneOf``/``allOf``/
``not``. Anything else (``format``, ``$ref``, ...) is ignored, i.e. accepted.

Coercion, when a value's type is not one the schema allows (AJV ``coerceTypes: true``), tries
the allowed types in order: to number/integer from a numeric string (``"5"`` → 5), a boolean
(1/0) or null (0); to string from a number (``1`` → ``"1"``, formatted as JavaScript does), a
boolean or null (``""``); to boolean from ``"true"``/``"false"``, 1/0 or null; to null from
``""``, 0 or false. Arrays and objects are never coerced. An integral float where only
``integer`` is allowed becomes an int (``5.0`` → 5), so Python tools get the type they expect.

Differences from AJV, by choice: after a type error the value's other keywords are not checked
(one clear message instead of several); for ``anyOf``/``oneOf`` only the summary error is
reported, and the first matching branch's coercions are kept.
"""

from __future__ import annotations

import copy
import json
import math
import re
from collections.abc import Callable
from typing import Any

__all__ = ["ToolArgumentsError", "validate_tool_arguments", "format_validation_error"]


class ToolArgumentsError(ValueError):
    """Arguments that do not satisfy a tool's schema; ``str(exc)`` is the model-facing text."""

    def __init__(self, message: str, errors: list[tuple[str, str]]) -> None:
        super().__init__(message)
        self.errors = errors


def validate_tool_arguments(tool: Any, arguments: Any) -> Any:
    """Validate and coerce ``arguments`` against ``tool.parameters``; return the coerced copy."""
    schema = getattr(tool, "parameters", None)
    data = copy.deepcopy(arguments)
    errors: list[tuple[str, str]] = []
    data = _check(schema, data, "", errors)
    if errors:
        raise ToolArgumentsError(format_validation_error(tool.name, errors, arguments), errors)
    return data


def format_validation_error(tool_name: str, errors: list[tuple[str, str]], arguments: Any) -> str:
    lines = [f'Validation failed for tool "{tool_name}":']
    lines += [f"  - {path}: {message}" for path, message in errors]
    received = json.dumps(arguments, indent=2, ensure_ascii=False, default=str)
    return "\n".join(lines) + "\n\nReceived arguments:\n" + received


# ---------------------------------------------------------------------------------------------


class _Fail:
    pass


_FAIL = _Fail()

_NUMERIC = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_INT_LITERAL = re.compile(r"[+-]?\d+")


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (list, tuple)):
        return "array"
    if isinstance(value, dict):
        return "object"
    return "unknown"


def _is_integral(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return True
    return isinstance(value, float) and math.isfinite(value) and value.is_integer()


def _has_type(value: Any, kind: str) -> bool:
    if kind == "integer":
        return _is_integral(value)
    return _json_type(value) == kind


def _js_number_text(value: int | float) -> str:
    """A number as JavaScript's ``String(n)`` writes it (``1.0`` → ``"1"``, ``1e-07`` → ``"1e-7"``)."""
    if isinstance(value, int):
        return str(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value.is_integer() and abs(value) < 1e21:
        return str(int(value))
    text = repr(value)
    return re.sub(r"e([+-])0*(\d)", r"e\1\2", text)


def _parse_number(text: str) -> int | float | _Fail:
    text = text.strip()
    if not _NUMERIC.fullmatch(text):
        return _FAIL
    if _INT_LITERAL.fullmatch(text):
        return int(text)
    return float(text)


def _coerce_to(value: Any, kind: str) -> Any:
    """``value`` coerced to the JSON type ``kind`` (as Ajv's ``coerceTypes``), or ``_FAIL``."""
    coerce = _COERCIONS.get(kind)
    return coerce(value, _json_type(value)) if coerce is not None else _FAIL


def _to_number(value: Any, source: str) -> Any:
    if source == "string":
        return _parse_number(value)
    if source == "boolean":
        return 1 if value else 0
    if source == "null":
        return 0
    return _FAIL


def _to_integer(value: Any, source: str) -> Any:
    number = _to_number(value, source)
    if isinstance(number, _Fail):
        return _FAIL
    return int(number) if _is_integral(number) else _FAIL


def _to_string(value: Any, source: str) -> Any:
    if source == "number":
        return _js_number_text(value)
    if source == "boolean":
        return "true" if value else "false"
    if source == "null":
        return ""
    return _FAIL


def _to_boolean(value: Any, source: str) -> Any:
    if source == "string" and value in ("true", "false"):
        return value == "true"
    if source == "number" and value in (0, 1):
        return value == 1
    if source == "null":
        return False
    return _FAIL


def _to_null(value: Any, source: str) -> Any:
    if value == "" or (source in ("number", "boolean") and value == 0):
        return None
    return _FAIL


_COERCIONS: dict[str, Callable[[Any, str], Any]] = {
    "number": _to_number,
    "integer": _to_integer,
    "string": _to_string,
    "boolean": _to_boolean,
    "null": _to_null,
}


def _json_equal(a: Any, b: Any) -> bool:
    ta, tb = _json_type(a), _json_type(b)
    if ta != tb:
        return False
    if ta == "array":
        return len(a) == len(b) and all(_json_equal(x, y) for x, y in zip(a, b, strict=True))
    if ta == "object":
        return a.keys() == b.keys() and all(_json_equal(a[k], b[k]) for k in a)
    return a == b


def _pointer(path: str, key: Any) -> str:
    token = str(key).replace("~", "~0").replace("/", "~1")
    return f"{path}/{token}"


def _display(path: str, fallback: str = "root") -> str:
    return path[1:] if path else fallback


def _check(schema: Any, value: Any, path: str, errors: list[tuple[str, str]]) -> Any:
    """Validate ``value`` (coercing it) against ``schema``; append errors; return the value."""
    if schema is True or schema is None:
        return value
    if schema is False:
        errors.append((_display(path), "boolean schema is false"))
        return value
    if not isinstance(schema, dict):
        return value

    where = _display(path)
    kinds = schema.get("type")
    if kinds is not None:
        allowed = [kinds] if isinstance(kinds, str) else list(kinds)
        if not any(_has_type(value, k) for k in allowed):
            for kind in allowed:
                coerced = _coerce_to(value, kind)
                if not isinstance(coerced, _Fail):
                    value = coerced
                    break
            else:
                errors.append((where, "must be " + ",".join(allowed)))
                return value
        if "integer" in allowed and "number" not in allowed and isinstance(value, float) and _is_integral(value):
            value = int(value)

    if "const" in schema and not _json_equal(value, schema["const"]):
        errors.append((where, "must be equal to constant"))
    if "enum" in schema and not any(_json_equal(value, option) for option in schema["enum"]):
        errors.append((where, "must be equal to one of the allowed values"))

    kind = _json_type(value)
    if kind == "number":
        _check_number(schema, value, where, errors)
    elif kind == "string":
        _check_string(schema, value, where, errors)
    elif kind == "array":
        value = _check_array(schema, value, path, errors)
    elif kind == "object":
        value = _check_object(schema, value, path, errors)

    return _check_combinators(schema, value, path, errors)


def _check_number(schema: dict, value: float, where: str, errors: list[tuple[str, str]]) -> None:
    limits = (
        ("maximum", lambda v, n: v <= n, "<="),
        ("minimum", lambda v, n: v >= n, ">="),
        ("exclusiveMaximum", lambda v, n: v < n, "<"),
        ("exclusiveMinimum", lambda v, n: v > n, ">"),
    )
    for keyword, ok, op in limits:
        bound = schema.get(keyword)
        if isinstance(bound, (int, float)) and not isinstance(bound, bool) and not ok(value, bound):
            errors.append((where, f"must be {op} {_js_number_text(bound)}"))
    step = schema.get("multipleOf")
    if isinstance(step, (int, float)) and not isinstance(step, bool) and step > 0:
        quotient = value / step
        if abs(quotient - round(quotient)) > 1e-9:
            errors.append((where, f"must be multiple of {_js_number_text(step)}"))


def _check_string(schema: dict, value: str, where: str, errors: list[tuple[str, str]]) -> None:
    longest = schema.get("maxLength")
    if isinstance(longest, int) and len(value) > longest:
        errors.append((where, f"must NOT have more than {longest} characters"))
    shortest = schema.get("minLength")
    if isinstance(shortest, int) and len(value) < shortest:
        errors.append((where, f"must NOT have fewer than {shortest} characters"))
    pattern = schema.get("pattern")
    if isinstance(pattern, str):
        try:
            matched = re.search(pattern, value) is not None
        except re.error:
            matched = True  # a pattern Python cannot compile is not the model's fault
        if not matched:
            errors.append((where, f'must match pattern "{pattern}"'))


def _check_array(schema: dict, value: list, path: str, errors: list[tuple[str, str]]) -> list:
    where = _display(path)
    most = schema.get("maxItems")
    if isinstance(most, int) and len(value) > most:
        errors.append((where, f"must NOT have more than {most} items"))
    least = schema.get("minItems")
    if isinstance(least, int) and len(value) < least:
        errors.append((where, f"must NOT have fewer than {least} items"))
    items = schema.get("items")
    value = list(value)
    if isinstance(items, list):
        for index, item_schema in enumerate(items[: len(value)]):
            value[index] = _check(item_schema, value[index], _pointer(path, index), errors)
    elif items is not None:
        for index in range(len(value)):
            value[index] = _check(items, value[index], _pointer(path, index), errors)
    return value


def _check_object(schema: dict, value: dict, path: str, errors: list[tuple[str, str]]) -> dict:
    where = _display(path, fallback="")
    for name in schema.get("required") or ():
        if name not in value:
            errors.append((where or str(name), f"must have required property '{name}'"))
    properties = schema.get("properties") or {}
    extra = schema.get("additionalProperties", True)
    if extra is not True:
        for name in list(value):
            if name in properties:
                continue
            if extra is False:
                errors.append((_display(path), "must NOT have additional properties"))
            else:
                value[name] = _check(extra, value[name], _pointer(path, name), errors)
    for name, prop_schema in properties.items():
        if name in value:
            value[name] = _check(prop_schema, value[name], _pointer(path, name), errors)
    return value


def _check_combinators(schema: dict, value: Any, path: str, errors: list[tuple[str, str]]) -> Any:
    where = _display(path)
    for sub in schema.get("allOf") or ():
        value = _check(sub, value, path, errors)
    if "anyOf" in schema:
        for sub in schema["anyOf"]:
            trial: list[tuple[str, str]] = []
            candidate = _check(sub, copy.deepcopy(value), path, trial)
            if not trial:
                value = candidate
                break
        else:
            errors.append((where, "must match a schema in anyOf"))
    if "oneOf" in schema:
        matches = []
        for sub in schema["oneOf"]:
            trial = []
            candidate = _check(sub, copy.deepcopy(value), path, trial)
            if not trial:
                matches.append(candidate)
        if len(matches) == 1:
            value = matches[0]
        else:
            errors.append((where, "must match exactly one schema in oneOf"))
    if "not" in schema:
        trial = []
        _check(schema["not"], copy.deepcopy(value), path, trial)
        if not trial:
            errors.append((where, "must NOT be valid"))
    return value
