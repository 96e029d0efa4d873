"""Files beside JSON and Parquet: CSV tables of a run, a sweep and a comparison, and latency percentiles chosen
by the user (``--metric-percentiles``, as ``vllm bench serve`` takes it).

* A run's ``summary.csv`` is one row: every scalar of ``summary.json``, nested blocks flattened with dots
  (``window.output_throughput``, ``per_domain.code.mean_ttft_ms``); lists are left out. ``requests.csv`` and
  ``steps.csv`` repeat the Parquet tables.
* A sweep's ``results.csv`` is :func:`specsim.sweep.results_frame` plus, per point, the chosen percentiles of
  TTFT, TPOT and E2EL over its measured requests (closed loop: those that complete in the window), from the per-request
  latencies every record keeps. ITL gaps are not kept per point, so sweep percentiles cover TTFT, TPOT, E2EL.
* Percentiles are numpy's linear interpolation, vLLM's rule (``vllm/benchmarks/serve.py`` calculate_metrics).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

import numpy as np
import pandas as pd

from specsim.analysis.metrics import percentile_key
from specsim.errors import SpecsimInputError

#: The per-request latencies a sweep record keeps (``latencies`` block, ms) -> vLLM's metric name.
RECORD_LATENCIES = {"ttft_ms": "ttft", "tpot_ms": "tpot", "e2el_ms": "e2el"}


def summary_row(summary: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """The scalars of a (nested) summary dict as one flat row, keys joined with dots; lists are left out."""
    row: dict[str, Any] = {}
    for k, v in summary.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            row.update(summary_row(v, key + "."))
        elif v is None or isinstance(v, (str, bool, int, float, np.integer, np.floating)):
            row[key] = v
    return row


def write_csv(df: pd.DataFrame, path: str | Path) -> Path:
    """Write ``df`` as CSV (no index); SpecsimInputError naming the path when it cannot be written."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        df.to_csv(path, index=False)
    except OSError as e:
        raise SpecsimInputError(str(path), None, "--csv", "a writable file path", e.strerror or type(e).__name__) from None
    return path


def write_run_csv(summary: dict, requests: pd.DataFrame, steps: pd.DataFrame, out_dir: str | Path) -> list[Path]:
    """``summary.csv`` (one flat row), ``requests.csv`` and ``steps.csv`` in ``out_dir``; returns the paths."""
    d = Path(out_dir)
    return [write_csv(pd.DataFrame([summary_row(summary)]), d / "summary.csv"),
            write_csv(requests, d / "requests.csv"), write_csv(steps, d / "steps.csv")]


def _percentiles_of(values: Iterable[float], name: str, percentiles) -> dict[str, float | None]:
    v = np.asarray(list(values), float)
    v = v[np.isfinite(v)]
    if v.size == 0:
        return {percentile_key(p, name): None for p in percentiles}
    return {percentile_key(p, name): float(q) for p, q in zip(percentiles, np.percentile(v, percentiles))}


def point_percentiles(records: list[dict], percentiles) -> pd.DataFrame:
    """Per successful point (column ``id``): ``p<P>_ttft_ms``, ``p<P>_tpot_ms``, ``p<P>_e2el_ms`` of its measured
    requests (a one-token request's TPOT counts as 0, as vLLM's goodput does; the record keeps it so)."""
    rows = []
    for r in records:
        lat = r.get("latencies") or {}
        if r.get("status") != "ok" or not lat:
            continue
        row = {"id": r["id"]}
        for col, name in RECORD_LATENCIES.items():
            row.update(_percentiles_of(lat.get(col, []), name, percentiles))
        rows.append(row)
    return pd.DataFrame(rows)


def load_percentiles(records: list[dict], results: pd.DataFrame, percentiles) -> pd.DataFrame:
    """Per (curve, mode, load): the percentiles of TTFT, TPOT and E2EL pooled over the seeds' measured requests.

    Args:
        records: the sweep's records; results: their :func:`specsim.sweep.results_frame` (for curve labels).
        percentiles: the P values.
    """
    by_id = {r["id"]: r for r in records}
    ok = results[results.status == "ok"] if len(results) else results
    rows = []
    for (curve, mode, load), sub in ok.groupby(["curve", "mode", "load"], sort=True):
        row: dict[str, Any] = {"curve": curve, "mode": mode, "load": load, "num_seeds": int(len(sub))}
        for col, name in RECORD_LATENCIES.items():
            pooled = [x for i in sub.id for x in (by_id[i].get("latencies") or {}).get(col, [])]
            row.update(_percentiles_of(pooled, name, percentiles))
        rows.append(row)
    return pd.DataFrame(rows)
