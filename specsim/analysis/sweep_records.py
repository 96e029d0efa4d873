"""A sweep's records on disk, read: one JSON file per finished point, checked on read.

Layout of a sweep directory ``DIR`` (written by :mod:`specsim.sweep.store`, which takes the record format from
here):

* ``DIR/points/<id>.json``: one record per finished point, written through a temporary file, fsync and
  ``os.replace``, so a record is either complete or absent. Each record carries a SHA-256 ``checksum``
  of its body (every field but ``checksum`` and ``wall_time_s``); a record that fails to parse, to
  match its checksum or whose ``id`` differs from its file name reads as missing.
* ``DIR/sweep.json``: the manifest of the latest sweep (spec, resolved scenario, trace hash, point ids).

The analysis side (frontier, report, plots, :mod:`specsim.analysis.sweep_tables`) reads records here without
importing the sweep runner or its executors. A record file is read and checked by
:mod:`specsim.analysis.record_io` (:func:`read_record`, :func:`body_checksum`), which parses each file once.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable

# body_checksum, canonical_sha and read_record are this module's API (store, tune and sweep_tables import them here)
from specsim.analysis.record_io import body_checksum, canonical_sha, read_record, record_is_valid  # noqa: F401
from specsim.errors import SpecsimInputError

#: Summary keys copied into a record (plus ``load`` and ``per_domain``).
SUMMARY_KEYS = (
    "completed", "unfinished", "unservable", "total", "measured_requests", "total_input_tokens",
    "total_output_tokens", "duration_s", "request_throughput", "output_throughput", "output_throughput_per_gpu",
    "decode_gpus", "prefill_gpus", "mean_ttft_ms", "median_ttft_ms", "p99_ttft_ms", "mean_tpot_ms",
    "median_tpot_ms", "p99_tpot_ms", "mean_itl_ms", "p99_itl_ms", "mean_e2el_ms", "mean_tps_per_user",
    "median_tps_per_user", "num_single_token", "mean_acceptance_length", "acceptance_rate",
    "mean_verify_tokens_per_request", "steps", "clipped_verify_lengths", "policy", "drafter", "gamma", "seed",
    "num_preemptions", "recomputed_tokens", "kv_clipped_verify_lengths", "prefix_cache_hit_rate",
    "mean_prefill_wait_ms", "mean_running_requests", "mean_waiting_requests", "admission_wait_in_tpot",
    "arrival_span_s",
)


def points_dir(out_dir: str | Path) -> Path:
    """``DIR/points``: one JSON record per finished point."""
    return Path(out_dir) / "points"


def unreadable_records(out_dir: str | Path) -> list[Path]:
    """The files of ``DIR/points`` that :func:`read_record` refuses (cut off, not JSON, a failed checksum or
    another id's name), sorted: :func:`load_records` skips them, so a reader should say so (a sweep run into
    the folder recomputes those points)."""
    d = points_dir(out_dir)
    return [p for p in sorted(d.glob("*.json")) if p.is_file() and not record_is_valid(p)] if d.is_dir() else []


def as_records(records: Any, field: str = "records") -> list[dict[str, Any]]:
    """Sweep records as the Python API takes them: a list of records (:func:`load_records`) as it is, or a sweep
    folder (``str`` or ``Path``), read with :func:`load_records`.

    Raises:
        SpecsimInputError: anything else (naming ``field``), or what :func:`load_records` raises.
    """
    if isinstance(records, (str, Path)):
        return load_records(records)
    if isinstance(records, list) and all(isinstance(r, dict) and "config" in r and "status" in r for r in records):
        return records
    raise SpecsimInputError(None, None, field, "sweep records (load_records(DIR)) or a sweep folder",
                            type(records).__name__)


def load_records(out_dir: str | Path, ids: Iterable[str] | None = None,
                 latest: bool = True) -> list[dict[str, Any]]:
    """Valid records of ``DIR`` (all, or those with the given ids), sorted by id; bad files are skipped.

    Reading the whole folder (``ids`` None) with ``latest`` drops the records later sweeps replaced
    (:func:`superseded_ids`), so that a sweep rerun into the same folder after its trace or a plug-in changed is
    read as that rerun, never as an average of the old and new versions.

    Raises:
        SpecsimInputError: reading the whole folder (``ids`` None) and ``out_dir`` is not a sweep's folder (no
            such folder; one run's folder; a sweep's points/ folder; a folder with neither points/ nor the
            manifest ``sweep.json``: a sweep that has written its manifest but no point yet reads as no records).
    """
    if ids is None and not Path(out_dir).is_dir():
        raise SpecsimInputError(str(out_dir), None, None, "a sweep's results folder (its --out)",
                                "a file" if Path(out_dir).exists() else "no such folder")
    d = points_dir(out_dir)
    if ids is None and not d.is_dir() and (Path(out_dir) / "summary.json").is_file():
        raise SpecsimInputError(str(out_dir), None, None, "a sweep's results folder (specsim sweep --out)",
                                "one run's folder (summary.json; specsim report reads it)")
    if ids is None and not d.is_dir() and Path(out_dir).resolve().name == "points":
        raise SpecsimInputError(str(out_dir), None, None, "a sweep's results folder (specsim sweep --out)",
                                f"its points/ folder: pass {Path(out_dir).resolve().parent}")
    if ids is None and not d.is_dir() and not (Path(out_dir) / "sweep.json").is_file():
        raise SpecsimInputError(str(out_dir), None, None, "a sweep's results folder (specsim sweep --out)",
                                "a folder with neither points/ nor sweep.json")
    if ids is not None:
        paths = [d / f"{i}.json" for i in ids]
    else:
        paths = sorted(d.glob("*.json")) if d.is_dir() else []
    recs = sorted((r for r in (read_record(p) for p in paths if p.is_file()) if r is not None),
                  key=lambda r: r["id"])
    if ids is None and latest:
        old = superseded_ids(out_dir, recs)
        recs = [r for r in recs if r["id"] not in old]
    return recs


def read_manifest(out_dir: str | Path) -> dict[str, Any]:
    """``DIR/sweep.json`` (the latest sweep's spec, scenario, trace hash, point ids, tiers) as a dict; ``{}``
    when it is absent or unreadable (every reader then falls back to its default)."""
    try:
        man = json.loads((Path(out_dir) / "sweep.json").read_text())
    except (OSError, ValueError):
        return {}
    return man if isinstance(man, dict) else {}


def manifest_point_ids(out_dir: str | Path) -> set[str]:
    """The point ids ``DIR/sweep.json`` lists (the latest sweep's points; empty without a readable manifest)."""
    ids = read_manifest(out_dir).get("point_ids", [])
    return {str(i) for i in ids} if isinstance(ids, list) else set()


#: Record config keys that version a point rather than name it: the content hashes of its trace, plug-in and
#: profile, and its measurement size (requests, time limit).
VERSION_KEYS = ("trace_sha", "plugin_sha", "profile_sha", "num_requests", "max_sim_s")


def version_free_key(rec: dict[str, Any]) -> str:
    """A record's configuration without :data:`VERSION_KEYS`: the point it measures (scenario, policy, knobs,
    load, seed)."""
    return canonical_sha({k: v for k, v in rec["config"].items() if k not in VERSION_KEYS})


def superseded(records: list[dict[str, Any]], latest_ids: set[str]) -> list[str]:
    """Ids of records replaced by a point of the latest sweep (``latest_ids``): the same point (scenario, policy,
    knobs, load, seed) measured on another version of the trace, plug-in or profile, or with another number of
    requests or time limit (a rerun with other ``--requests-per-user``), so that one seed is never counted
    twice."""
    latest_keys = {version_free_key(r) for r in records if r["id"] in latest_ids}
    return [r["id"] for r in records if r["id"] not in latest_ids and version_free_key(r) in latest_keys]


def superseded_ids(out_dir: str | Path, records: list[dict[str, Any]]) -> set[str]:
    """Ids of the folder's records that a later sweep replaced: those :func:`superseded` by the latest sweep's
    points, and those an earlier sweep replaced (``superseded_ids`` of ``DIR/sweep.json``, kept from manifest to
    manifest by :func:`specsim.sweep.store.write_manifest`) unless the latest sweep ran them again. Without the
    kept list, a sweep of other policies into the folder brought back records two sweeps old and pooled them
    with their replacements as extra seeds (a fresh user's report)."""
    latest = manifest_point_ids(out_dir)
    kept = read_manifest(out_dir).get("superseded_ids", [])
    kept = {str(i) for i in kept} if isinstance(kept, list) else set()
    return set(superseded(records, latest)) | (kept - latest)


def mixed_workloads(recs: list[dict]) -> str:
    """Where a folder's curves were measured on different requests at the same load (another trace, or another
    ``--num-requests`` / ``--requests-per-user``, from separate sweeps into one ``--out``: a fresh user's report
    had compare rank 100-request points against 200-request ones), the first such load and what each curve ran
    on (fewest requests first, curves by name: records are read in an order their hashes set), as text; "" when
    every load's curves share their requests."""
    by_load: dict[tuple, dict[tuple, list[str]]] = {}
    for r in recs:
        c = r["config"]
        curve = c["policy"] + "".join(f" {k}={v}" for k, v in sorted((c.get("knobs") or {}).items())
                                      if k not in ("gamma", "drafter"))
        runs = by_load.setdefault((c["load"]["mode"], float(c["load"]["value"])), {})
        curves = runs.setdefault((c.get("num_requests"), c.get("trace_sha")), [])
        if curve not in curves:
            curves.append(curve)
    mixed = {k: v for k, v in by_load.items() if len(v) > 1}
    if not mixed:
        return ""
    (mode, value), runs = min(mixed.items())
    shown = "; ".join(f"{', '.join(sorted(curves))} on {n} requests (trace {str(sha)[:8]})"
                      for (n, sha), curves in sorted(runs.items(), key=lambda kv: (kv[0][0] or 0, str(kv[0][1]))))
    return f"at {len(mixed)} load{'s' if len(mixed) > 1 else ''} the curves ran on different requests ({mode} " \
           f"load {value:g}: {shown})"


def speculation_notes(recs: list[dict]) -> list[str]:
    """What a sweep's speculating points were charged for speculation's own overhead (issue 20), one note per
    distinct (values, source) as its points recorded them (:func:`specsim.hardware.profile.speculation_text`),
    and one counting the speculating points recorded before records kept it (their charge is unknown: before
    2026-12-02 a plain measured table, like the default profile, was charged none); and the acceptance notice of
    points that drafted on built-in rates (:func:`specsim.run_notices.default_acceptance_notice`), once per distinct
    text. ``recs``: sweep records (failed ones are skipped)."""
    from specsim.hardware.profile import speculation_text

    notes, old = [], 0
    for r in recs:
        if r.get("status") != "ok" or not ((r.get("config") or {}).get("knobs") or {}).get("gamma"):
            continue
        got = (r.get("summary") or {}).get("speculation_overhead")
        if got is None:
            old += 1
        elif speculation_text(got) not in notes:
            notes.append(speculation_text(got))
        rates = (r.get("summary") or {}).get("acceptance_notice")
        if rates and rates not in notes:
            notes.append(rates)
    if old:
        notes.append(f"{old} speculating points were recorded by an earlier specsim, which kept no record of the "
                     "speculation overhead they were charged (before 2026-12-02 a plain measured table, like the "
                     "default profile, was charged none): sweep them again with --force to compare like with like")
    return notes
