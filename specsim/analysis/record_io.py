"""One sweep point record file read and checked: parsed once, its checksum rebuilt from the file's own text, and
a file already read in this process not parsed again.

The rule is :mod:`specsim.analysis.sweep_records`' (which re-exports :func:`read_record`): a record is the JSON
object of ``DIR/points/<id>.json`` whose ``checksum`` is :func:`body_checksum` of it and whose ``id`` is the file's
name; anything else reads as None. This module only makes the rule cheap on large records, whose per-request
lists (five of thousands of numbers each) are most of their text:

* Checksum from the text. :func:`body_checksum` re-encodes the record as canonical JSON (sorted keys, no spaces),
  which cost more than parsing it (a 55 MB folder of 90 records: 2.3 s to encode, 1.4 s to parse).
  :func:`specsim.sweep.store.write_record` writes compact JSON that differs from the canonical text only in the
  order of object keys, so :func:`_value` rebuilds the canonical text while parsing: an object's members are
  joined again in key order, and every other value keeps its text as written (a value holding an object, whose
  keys may need sorting, is re-encoded). Where the digest of that text equals the stored checksum, it is the very
  text the writer hashed, so the parsed record re-encodes to it too and is valid by the rule. Where it does not
  (a record written by another tool, indented or altered), or the text is not compact JSON, the rule decides as
  ever: :func:`json.loads` and :func:`body_checksum`.
* Memo. ``specsim report`` read every record three times (the unreadable-records warning, the speculation notes,
  the page) and ``compare`` twice. A text read before (the same SHA-256) is not parsed again: the valid record is
  kept as a :mod:`marshal` copy, so each read gets fresh objects that no earlier caller can have changed. The memo
  keeps at most :data:`MEMO_BYTES` of copies, the least recently read dropped first.
"""

from __future__ import annotations

import hashlib
import json
import locale
import marshal
import threading
from json.decoder import scanstring
from pathlib import Path
from typing import Any

#: Record fields left out of the checksum (``wall_time_s`` differs between runs of the same point).
UNCHECKED = ("checksum", "wall_time_s")
#: Bytes of marshal copies the memo keeps (least recently read dropped first).
MEMO_BYTES = 256 << 20

_DECODER = json.JSONDecoder()
_memo: dict[bytes, tuple[bytes | None, Any]] = {}     # SHA-256 of a file's bytes -> (marshal copy or None, its id)
_memo_bytes = 0
_memo_lock = threading.Lock()


def canonical_sha(obj: Any) -> str:
    """SHA-256 hex digest (64 chars) of ``obj`` as canonical JSON (sorted keys, no spaces)."""
    return hashlib.sha256(json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def body_checksum(rec: dict[str, Any]) -> str:
    """A record's checksum: :func:`canonical_sha` of every field but ``checksum`` and ``wall_time_s``."""
    body = {k: v for k, v in rec.items() if k not in UNCHECKED}
    return canonical_sha(body)


#: A piece of canonical text: a string, or the (start, end) span of the file's text that is already canonical.
Piece = str | tuple[int, int]


def _object(text: str, pos: int) -> tuple[dict[str, Any], dict[str, list[Piece]], int]:
    """(the object, each member's canonical text in pieces, the end) of the compact JSON object at ``text[pos]``.

    Raises:
        ValueError, IndexError: not compact JSON there (whitespace between tokens included).
    """
    obj: dict[str, Any] = {}
    canon: dict[str, list[Piece]] = {}
    pos += 1
    if text[pos] == "}":
        return obj, canon, pos + 1
    while True:
        if text[pos] != '"':
            raise ValueError(f"a member name expected at {pos}")
        key, pos = scanstring(text, pos + 1)
        if text[pos] != ":":
            raise ValueError(f"':' expected at {pos}")
        canon[key] = []                                 # a repeated key: its last value, as json.loads
        obj[key], pos = _value(text, pos + 1, canon[key])
        if text[pos] == "}":
            return obj, canon, pos + 1
        if text[pos] != ",":
            raise ValueError(f"',' or '}}' expected at {pos}")
        pos += 1


def _joined(canon: dict[str, list[Piece]], out: list[Piece], leave_out: tuple[str, ...] = ()) -> None:
    """Append to ``out`` the canonical text of an object from its members' (:func:`_object`): keys sorted,
    ``leave_out`` left out."""
    out.append("{")
    for i, key in enumerate(k for k in sorted(canon) if k not in leave_out):
        out.append(f"{',' if i else ''}{json.dumps(key)}:")
        out += canon[key]
    out.append("}")


def _value(text: str, pos: int, out: list[Piece]) -> tuple[Any, int]:
    """(the value, the end) at ``text[pos]``; appends to ``out`` its canonical text, right where ``text`` is the
    compact JSON the writer wrote: its own span, or re-encoded where it holds an object (keys to sort).

    Raises:
        ValueError, IndexError: not compact JSON there.
    """
    if text[pos] == "{":
        obj, canon, end = _object(text, pos)
        _joined(canon, out)
        return obj, end
    value, end = _DECODER.raw_decode(text, pos)
    out.append((pos, end) if text.find("{", pos, end) < 0 else json.dumps(value, sort_keys=True,
                                                                           separators=(",", ":")))
    return value, end


def _sha256(pieces: list[Piece], text: str, data: bytes) -> str:
    """SHA-256 hex digest of the UTF-8 text ``pieces`` spell, spans read from ``text`` (``data``: its bytes, whose
    offsets are the text's where it is ASCII, as the writer's JSON is)."""
    h, ascii_text, view = hashlib.sha256(), text.isascii() and len(data) == len(text), memoryview(data)
    for p in pieces:
        if isinstance(p, str):
            h.update(p.encode("utf-8", "surrogatepass"))
        else:
            h.update(view[p[0]:p[1]] if ascii_text else text[p[0]:p[1]].encode("utf-8", "surrogatepass"))
    return h.hexdigest()


def _parse_checked(text: str, data: bytes) -> tuple[Any, bool]:
    """(``text`` parsed, whether its checksum holds); ValueError where it is not JSON. ``data``: the file's bytes."""
    try:
        if text[:1] == "{":
            rec, canon, end = _object(text, 0)
            if end == len(text) and isinstance(rec.get("checksum"), str):
                body: list[Piece] = []
                _joined(canon, body, UNCHECKED)
                if _sha256(body, text, data) == rec["checksum"]:
                    return rec, True
    except (ValueError, IndexError, RecursionError):
        pass                                            # not the writer's compact JSON: the rule as ever
    rec = json.loads(text)
    return rec, isinstance(rec, dict) and rec.get("checksum") == body_checksum(rec)


def _remember(digest: bytes, entry: tuple[bytes | None, Any]) -> None:
    """Keep ``entry`` for the file bytes of SHA-256 ``digest``, dropping the least recently read copies beyond
    :data:`MEMO_BYTES`."""
    global _memo_bytes
    with _memo_lock:
        _memo[digest] = entry
        _memo_bytes += len(entry[0] or b"")
        while _memo_bytes > MEMO_BYTES and len(_memo) > 1:
            old = _memo.pop(next(iter(_memo)))
            _memo_bytes -= len(old[0] or b"")


def _checked(text: str, data: bytes) -> tuple[dict[str, Any] | None, tuple[bytes | None, Any] | None]:
    """(the record where its checksum holds, else None; its memo entry: (marshal copy, id), (None, None) for a
    file that is no record, None where a record nested too deep for marshal cannot be kept)."""
    try:
        rec, ok = _parse_checked(text, data)
    except ValueError:
        return None, (None, None)
    if not ok:
        return None, (None, None)
    try:
        return rec, (marshal.dumps(rec), rec.get("id"))
    except ValueError:
        return rec, None


def _read(path: str | Path, copy: bool) -> dict[str, Any] | bool | None:
    """The record at ``path`` (``copy``) or True (not ``copy``) where it is valid by the rule, else None."""
    try:
        data = Path(path).read_bytes()
        text = data.decode(locale.getpreferredencoding(False))      # as Path.read_text decodes
    except (OSError, ValueError):
        return None
    digest = hashlib.sha256(data).digest()
    with _memo_lock:
        entry = _memo.pop(digest, None)
        if entry is not None:
            _memo[digest] = entry                       # the most recently read now
    if entry is not None:
        blob, rec_id = entry
        if blob is None or rec_id != Path(path).stem:
            return None
        return marshal.loads(blob) if copy else True
    rec, entry = _checked(text, data)
    if entry is not None:
        _remember(digest, entry)
    if rec is None or rec.get("id") != Path(path).stem:
        return None
    return rec if copy else True                        # a record just parsed is this caller's own


def read_record(path: str | Path) -> dict[str, Any] | None:
    """A record, or None when the file is cut off, unparsable, fails its checksum or names another id."""
    rec = _read(path, copy=True)
    return rec if isinstance(rec, dict) else None


def record_is_valid(path: str | Path) -> bool:
    """Whether :func:`read_record` reads a record at ``path`` (not None), without building it where the file was
    read before."""
    return _read(path, copy=False) is not None
