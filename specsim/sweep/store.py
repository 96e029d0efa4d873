"""Sweep records on disk, written: one JSON file per finished point, written atomically, and the manifest.

The record format and its reading (``load_records``, ``read_record``, the checksum, ``SUMMARY_KEYS``) live in
:mod:`specsim.analysis.sweep_records`. Layout of a sweep directory ``DIR``:

* ``DIR/points/<id>.json``: one record per finished point, written through a temporary file, fsync and
  ``os.replace``, so a record is either complete or absent. Each record carries a SHA-256 ``checksum``
  of its body (every field but ``checksum`` and ``wall_time_s``); a record that fails to parse, to
  match its checksum or whose ``id`` differs from its file name reads as missing.
* ``DIR/sweep.json``: the manifest of the latest sweep (spec, resolved scenario, trace hash, point ids).

Resume rule (:func:`finished_ids`): a point is done when its record is valid and its status is ``ok``,
or ``error`` unless failed points are retried; leftover temporary files and invalid records are deleted.

This module knows nothing about how points are run.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict
from pathlib import Path
from typing import Any, Iterable

from specsim.analysis.sweep_records import (body_checksum, load_records, points_dir, read_manifest, read_record,
                                            superseded, superseded_ids, version_free_key)
from specsim.errors import SpecsimInputError
from specsim.jsonfiles import jsonable

#: Version of the record layout; part of every point's identity.
RECORD_VERSION = 1


def _write_atomic(final: Path, text: str) -> Path:
    """Write ``text`` to ``final`` through ``.<name>.tmp-<pid>`` beside it, fsync and ``os.replace``."""
    tmp = final.parent / f".{final.name}.tmp-{os.getpid()}"
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, final)
    return final


def write_record(out_dir: str | Path, rec: dict[str, Any]) -> Path:
    """Write a record atomically onto ``DIR/points/<id>.json`` with its checksum; returns that path.

    Args:
        out_dir: the sweep directory (created if missing).
        rec: a record dict with at least ``id`` (JSON-serialisable).
    """
    d = points_dir(out_dir)
    d.mkdir(parents=True, exist_ok=True)
    rec = dict(rec, checksum=body_checksum(rec))
    return _write_atomic(d / f"{rec['id']}.json", json.dumps(rec, separators=(",", ":")))


def finished_ids(out_dir: str | Path, ids: Iterable[str], retry_failed: bool) -> tuple[set[str], int]:
    """Which of ``ids`` are already done in ``DIR``, and how many invalid records were deleted.

    Removes leftover temporary files and every record of ``ids`` that fails :func:`read_record`
    (it is then recomputed). A valid record is done when its status is ``ok``, or when it is an
    ``error`` and ``retry_failed`` is False.

    Returns:
        (done ids, number of invalid records deleted)
    """
    d = points_dir(out_dir)
    done: set[str] = set()
    bad = 0
    if not d.is_dir():
        return done, bad
    for tmp in d.glob(".*.json.tmp-*"):
        tmp.unlink(missing_ok=True)
    for pid in ids:
        f = d / f"{pid}.json"
        if not f.exists():
            continue
        rec = read_record(f)
        if rec is None:
            bad += 1
            f.unlink(missing_ok=True)
        elif rec["status"] == "ok" or not retry_failed:
            done.add(pid)
    return done, bad


def check_same_scenario(out_dir: str | Path, scenario: Any) -> None:
    """Refuse to add points of ``scenario`` to a sweep folder whose points were made with another scenario:
    ``compare``, ``recommend`` and ``report`` read one scenario per folder.

    Raises:
        SpecsimInputError: ``DIR/sweep.json`` names another scenario hash and ``DIR/points`` holds records.
    """
    old = read_manifest(out_dir).get("scenario_hash")      # none readable: this sweep writes the manifest
    if old and old != scenario.hash() and any(points_dir(out_dir).glob("*.json")):
        raise SpecsimInputError("--out", None, "scenario",
                                "a new --out for another scenario (compare, recommend and report read one "
                                "scenario per folder; --scenario and --set change it)",
                                f"{out_dir} holds points of scenario {old[:12]}, this sweep's is "
                                f"{scenario.hash()[:12]}")


def check_same_trace(out_dir: str | Path, points: Iterable[Any], trace: Any) -> None:
    """Refuse a sweep that would leave ``DIR`` holding points measured on another trace beside its own: the
    folder's points that this sweep does not recompute and whose requests are not the first ones of ``trace``
    (another count of the same trace's requests is another matter: ``specsim sweep`` warns of it). A rerun of
    the same points after the trace changed replaces them (:func:`specsim.analysis.sweep_records.superseded`). A
    fresh user swept two curves on a synthetic trace into a folder of the bundled one, and compare then ranked
    curves built from both (a change of scenario was refused, one of trace was not).

    Raises:
        SpecsimInputError: naming ``--out``, how many points of another trace would be left, and which.
    """
    if not points_dir(out_dir).is_dir():
        return
    keys = {version_free_key({"config": p.config}) for p in points}
    heads: dict[int, str] = {}

    def ours(cfg: dict) -> bool:                        # its requests are the first ones of this trace
        n = int(cfg.get("num_requests") or len(trace))
        if n not in heads:
            heads[n] = trace.head(n).content_hash() if n < len(trace) else trace.content_hash()
        return cfg.get("trace_sha") == heads[n]
    left = [r for r in load_records(out_dir) if version_free_key(r) not in keys and not ours(r["config"])]
    if left:
        curves = sorted({f"{r['config']['policy']} at {r['config']['load']['value']:g}" for r in left})
        raise SpecsimInputError("--out", None, "trace",
                                "a new --out for another trace (compare, recommend and report rank one folder's "
                                "curves together), or the folder's own curves and loads again on this trace",
                                f"{out_dir} holds {len(left)} points measured on other requests than this trace's "
                                f"({', '.join(curves[:4])}{' ...' if len(curves) > 4 else ''}), which this sweep "
                                "does not recompute")


def write_manifest(out_dir: str | Path, spec: Any, scenario: Any, trace: Any, points: Iterable[Any],
                   tiers: Iterable[float] | None = None) -> Path:
    """Write ``DIR/sweep.json`` atomically: the spec, resolved scenario, trace hash, point ids, SLA tiers, and the
    ids of the folder's records that sweeps so far replaced (:func:`specsim.analysis.sweep_records.superseded_ids`).

    Args:
        out_dir: the sweep directory (created if missing).
        spec: the sweep's :class:`specsim.sweep.SweepSpec` (any dataclass).
        scenario: the resolved :class:`specsim.scenario.Scenario`.
        trace: the full :class:`specsim.workload.trace.Trace`.
        points: the sweep's points (objects with an ``id``).
        tiers: the SLA tiers (TPS/user) the sweep is made for; later commands without ``--tiers`` use
            them (:func:`specsim.analysis.tiers.sweep_tiers`). None: the key is left out.

    Returns:
        The manifest's path.
    """
    d = Path(out_dir)
    d.mkdir(parents=True, exist_ok=True)
    ids = [p.id for p in points]
    # the records replaced so far stay replaced when a later sweep runs other points (the latest sweep's own
    # points excepted: a rerun of an earlier version makes it current again)
    recs = load_records(d, latest=False) if points_dir(d).is_dir() else []     # a new folder has no records yet
    replaced = (superseded_ids(d, recs) | set(superseded(recs, set(ids)))) - set(ids)
    man = {"spec": asdict(spec), "scenario": scenario.to_dict(), "scenario_hash": scenario.hash(),
           "scenario_source": scenario.source, "trace": str(getattr(trace, "source", None)),
           "trace_sha": trace.content_hash(), "point_ids": ids, "superseded_ids": sorted(replaced)}
    if tiers is not None:
        man["tiers"] = [float(t) for t in tiers]
    return _write_atomic(d / "sweep.json", json.dumps(jsonable(man), indent=1) + "\n")
