"""Rebuilding the dataclasses of a profile's ``metadata.step_model`` from JSON (:class:`ModelConfig`,
:class:`GpuSpec`, :class:`EngineTerms`) with every problem named by the profile file and the field's path, never a
Python ``TypeError``/``KeyError`` text (:func:`from_json`)."""

from __future__ import annotations

from dataclasses import MISSING, fields
from typing import Any

from specsim.errors import SpecsimInputError

#: What a field annotated with each type must hold in JSON, in words.
_WORDS = {"int": "an int", "float": "a number", "bool": "true or false", "str": "a string", "None": "null"}


def _fits(value: Any, kinds: list[str]) -> bool:
    """Whether a JSON value has one of the annotation's types (an int is a number; a bool is not)."""
    if value is None:
        return "None" in kinds
    if isinstance(value, bool):
        return "bool" in kinds
    if isinstance(value, int):
        return "int" in kinds or "float" in kinds
    if isinstance(value, float):
        return "float" in kinds
    return isinstance(value, str) and "str" in kinds


def from_json(cls: type, values: Any, source: str | None, where: str, overrides: dict | None = None) -> Any:
    """``cls(**values)`` for a JSON object, checked first: an object, no unknown key, every required key, each
    value of its field's type (the annotation's int, float, bool, str or None); then the class's own checks.

    Args:
        cls: the dataclass. values: the JSON value read. source: the file (for the error).
        where: the field's path in the file (``metadata.step_model.gpu``). overrides: keys set before ``values``
            (defaults a file may omit).

    Raises:
        SpecsimInputError: naming ``source`` and ``where.<key>``.
    """
    if not isinstance(values, dict):
        raise SpecsimInputError(source, None, where, f"a JSON object of {cls.__name__} fields",
                                f"{type(values).__name__} {values!r}"[:80])
    known = {f.name: f for f in fields(cls) if f.init}
    for key in values:
        if key not in known:
            raise SpecsimInputError(source, None, f"{where}.{key}", f"one of the {cls.__name__} fields "
                                    f"{sorted(known)}", "an unknown key")
    merged = {**(overrides or {}), **values}
    for name, f in known.items():
        if name not in merged:
            if f.default is MISSING and f.default_factory is MISSING:
                raise SpecsimInputError(source, None, f"{where}.{name}", f"a value ({cls.__name__} field)",
                                        "nothing (missing)")
            continue
        kinds = [k.strip() for k in str(f.type).split("|")]
        if set(kinds) <= set(_WORDS) and not _fits(merged[name], kinds):
            raise SpecsimInputError(source, None, f"{where}.{name}", " or ".join(_WORDS[k] for k in kinds),
                                    repr(merged[name]))
    try:
        return cls(**merged)
    except SpecsimInputError as e:
        field = e.field.removeprefix("terms.") if e.field else None
        raise SpecsimInputError(source, e.line, f"{where}.{field}" if field else where, e.expected, e.got) from None


__all__ = ["from_json"]
