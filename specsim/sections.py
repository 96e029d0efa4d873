"""Typed configuration sections: frozen pydantic dataclasses whose construction checks types strictly (no ``1`` for
true, no ``"3"`` for 3, no NaN, unknown keys refused), then each section's own ranges, and raises
:class:`~specsim.errors.SpecsimInputError` naming ``section.key``, what it expects and the value, never pydantic's
ValidationError. The scenario's sections (:mod:`specsim.scenario`) are built with it."""

from __future__ import annotations

import sys
import typing
from dataclasses import dataclass, fields
from typing import Any, ClassVar

from pydantic import ConfigDict, ValidationError, ValidationInfo, field_validator
from pydantic.dataclasses import dataclass as pydantic_dataclass

from specsim.errors import SpecsimInputError, did_you_mean

#: Section types: strict (no ``1`` for true, no ``"3"`` for 3), unknown keys refused, NaN and infinities refused.
_STRICT = ConfigDict(strict=True, extra="forbid", allow_inf_nan=False)
#: A pydantic error type -> what the key expects, in words.
_WORDS = {"bool_type": "true or false", "int_type": "an int", "float_type": "a finite float",
          "finite_number": "a finite float", "string_type": "a string", "dict_type": "a table",
          "list_type": "a list"}


@dataclass(frozen=True)
class Bound:
    """A numeric key's range, stated once: the section checks it when built (:meth:`Section._check_bounds`) and the
    JSON Schema of scenario files states it (:func:`specsim.scenario_schema.scenario_schema`).

    Args:
        lo, hi: the ends (None: unbounded on that side), in the key's own unit.
        lo_open, hi_open: the end itself is excluded.
        noun: what the key holds, as the error says it (``"an int"``, ``"a fraction"``).
        note: the words after the range in the error (its unit, what leaving it out means).

    For a key of lists (``acceptance.rates``) the bound is that of every number in them, the lists non-empty; the
    section checks those itself.
    """

    lo: float | None = None
    hi: float | None = None
    lo_open: bool = False
    hi_open: bool = False
    noun: str = "a float"
    note: str = ""

    def holds(self, v: float) -> bool:
        """Whether ``v`` lies in the range."""
        above = self.lo is None or (v > self.lo if self.lo_open else v >= self.lo)
        return above and (self.hi is None or (v < self.hi if self.hi_open else v <= self.hi))

    def range_words(self) -> str:
        """The range as the docstrings write it: ``>= 1``, ``> 0``, ``in (0, 1]``, ``in [0, 10)``."""
        if self.hi is None:
            return f"{'>' if self.lo_open else '>='} {self.lo:g}"
        if self.lo is None:
            return f"{'<' if self.hi_open else '<='} {self.hi:g}"
        left, right = "(" if self.lo_open else "[", ")" if self.hi_open else "]"
        return f"in {left}{self.lo:g}, {self.hi:g}{right}"

    def expected(self) -> str:
        """What the error says the key expects: noun, range, note."""
        return f"{self.noun} {self.range_words()}{self.note}"

    def json_schema(self) -> dict[str, float]:
        """The range as JSON Schema keywords (draft 6 on: numeric ``exclusiveMinimum`` / ``exclusiveMaximum``)."""
        out = {}
        if self.lo is not None:
            out["exclusiveMinimum" if self.lo_open else "minimum"] = self.lo
        if self.hi is not None:
            out["exclusiveMaximum" if self.hi_open else "maximum"] = self.hi
        return out


class Section:
    """Shared by the sections: plain values before pydantic's strict check, ranges after it (:attr:`BOUNDS`, then
    the section's own ``_validate``)."""

    SECTION: ClassVar[str] = ""
    #: Each numeric key's range (:class:`Bound`), checked before ``_validate``; an unset (None) key passes.
    BOUNDS: ClassVar[dict[str, Bound]] = {}

    @field_validator("*", mode="before")
    @classmethod
    def _plain(cls, value: Any, info: ValidationInfo) -> Any:
        """numpy scalars as Python values; an integral float for an int key as that int (``4096.0`` -> 4096)."""
        if type(value).__module__ == "numpy" and getattr(value, "ndim", None) == 0:
            value = value.item()
        if isinstance(value, float) and value.is_integer() and \
                cls.__pydantic_fields__[info.field_name].annotation in (int, int | None):  # type: ignore[attr-defined]
            value = int(value)
        return value

    def __post_init__(self) -> None:
        self._check_bounds()
        self._validate()

    def _check_bounds(self) -> None:
        """Raise :class:`SpecsimInputError` naming the first key outside its :attr:`BOUNDS` entry (a key of lists is
        the section's own to check)."""
        for key, bound in self.BOUNDS.items():
            v = getattr(self, key)
            if isinstance(v, (int, float)):
                self._check(bound.holds(v), key, bound.expected())

    def _validate(self) -> None:
        """Raise :class:`SpecsimInputError` naming the first field outside its range."""

    @classmethod
    def _unknown_key_hint(cls, key: str, value: Any) -> str:
        """Words added to the error of a key the section does not have, set to ``value`` (after the closest valid
        key); none here."""
        return ""

    def _check(self, cond: bool, key: str, expected: str) -> None:
        if not cond:
            raise SpecsimInputError(None, None, f"{self.SECTION}.{key}", expected, repr(getattr(self, key)))


@typing.dataclass_transform(frozen_default=True)
def typed_section(cls: type) -> type:
    """``cls`` as a frozen pydantic dataclass whose construction (and :func:`dataclasses.replace`) raises
    :class:`SpecsimInputError` instead of pydantic's ValidationError."""
    cls = pydantic_dataclass(frozen=True, config=_STRICT)(cls)
    validate = cls.__init__

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        try:
            validate(self, *args, **kwargs)
        except ValidationError as e:
            raise _input_error(type(self), e) from None
    cls.__init__ = __init__  # type: ignore[misc]
    return cls


def _input_error(cls: Any, err: ValidationError) -> SpecsimInputError:
    """The first error of ``err`` (a section's construction) as a SpecsimInputError naming ``section.key``."""
    first = err.errors()[0]
    cause = (first.get("ctx") or {}).get("error")
    if isinstance(cause, SpecsimInputError):                  # a range check of _validate
        return cause
    loc, known = first["loc"], [f.name for f in fields(cls)]
    key = known[loc[0]] if loc and isinstance(loc[0], int) and loc[0] < len(known) else str(loc[0] if loc else "")
    if first["type"] in ("unexpected_keyword_argument", "unexpected_positional_argument"):
        hint = cls._unknown_key_hint(key, first["input"])
        return SpecsimInputError(None, None, f"{cls.SECTION}.{key}",
                                 f"a key of [{cls.SECTION}]{did_you_mean(key, known)}{hint}")
    if first["type"] == "literal_error":
        want = "one of " + ", ".join(map(repr, typing.get_args(cls.__pydantic_fields__[key].annotation)))
    else:
        want = _WORDS.get(first["type"], first["msg"])
    if len(loc) > 1:
        want += " at " + ".".join(map(str, loc[1:]))
    if key in cls.__dataclass_fields__ and cls.__dataclass_fields__[key].default is None:
        want += " (or leave the key out)"
    return SpecsimInputError(None, None, f"{cls.SECTION}.{key}", want, repr(first["input"]))


#: Keys that size one thing two ways (setting both is an error): a later ``--set`` of one replaces the other.
EXCLUSIVE_KEYS = {("cluster", "kv_capacity_tokens"): "gpu_memory_utilization",
                  ("cluster", "gpu_memory_utilization"): "kv_capacity_tokens"}


def later_override(current: Any, updates: dict[str, Any], src: str) -> dict[str, Any]:
    """``updates`` (``{section: {key: value}}``, one ``--set``) as it applies over the scenario ``current``: the
    bare word ``none`` for an optional key that is not a string clears it (unset, as if the files never set it), and
    a value for one of a pair of :data:`EXCLUSIVE_KEYS` clears the other where an earlier file set it, with a note
    on stderr naming ``src`` (``--set cluster.kv_capacity_tokens=N`` over a file's ``gpu_memory_utilization``)."""
    out = {}
    for section, values in updates.items():
        cur = getattr(current, section, None)
        if cur is None or not isinstance(values, dict):
            out[section] = values
            continue
        values = {k: None if v == "none" and _clearable(type(cur), k) else v for k, v in values.items()}
        for key, value in list(values.items()):
            other = EXCLUSIVE_KEYS.get((section, key))
            if value is not None and other and other not in values and getattr(cur, other, None) is not None:
                values[other] = None
                print(f"note: {src} replaces {section}.{other} = {getattr(cur, other)} set before it (the two size "
                      f"the same thing; {section}.{other} is now unset)", file=sys.stderr)
        out[section] = values
    return out


def _clearable(cls: Any, key: str) -> bool:
    """Whether ``cls``'s field ``key`` may be None and is not a string (so the word ``none`` can only mean unset)."""
    field = getattr(cls, "__pydantic_fields__", {}).get(key)
    args = typing.get_args(field.annotation) if field is not None else ()
    return type(None) in args and str not in args
