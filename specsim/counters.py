"""Import aggregate per-position acceptance counters, as serving engines expose them.

Engines rarely log per-step outcomes; they keep counters. vLLM (``vllm/v1/spec_decode/metrics.py``)
counts, over all verification steps of a run: ``num_drafts`` (request-steps that carried drafts),
``num_draft_tokens`` (drafted tokens), ``num_accepted_tokens`` and ``num_accepted_tokens_per_pos[k]``
(request-steps whose draft at position k was accepted). Acceptance stops at the first rejection, so
position k is accepted iff drafts 1..k all are: the per-position counter divided by ``num_drafts`` is the
**survival** s_k = P(accepted length >= k) (data/SOURCES.md section 3). From it:

- conditional acceptance alpha_k = s_k / s_{k-1} (s_0 = 1), the DESIGN.md alpha_k, pooled over steps
  as the paper's Fig. 2 measures it (PAPER.md section 8.2);
- mean acceptance length (tokens emitted per request-step, bonus included) = 1 + sum_k s_k.

That conversion holds only if every request-step drafted every position (fixed-length drafting). With
adaptive-length drafting, the denominator of position k is the number of steps that drafted k, which the
counters do not hold, so such counters are rejected with a :class:`SpecsimInputError` saying why. The
signs of it: ``num_draft_tokens != num_drafts * num_spec_tokens``, per-position draft counts that are not
constant, or a survival that rises with k.

Sources read here: a counters CSV (the format of the shared ``spec_acceptance`` example: columns
``num_spec_tokens`` and ``frac_drafts_accepting_pos1..K``, optional ``num_drafts``,
``num_draft_tokens``, ``accepted_tokens_pos1..K`` and ``reported_mean_acceptance_length``) and a vLLM
Prometheus ``/metrics`` text dump (:func:`load_counters` picks by suffix); :func:`rate_table` turns counters
into the rate table that ``acceptance.table`` reads (``specsim counters`` writes it).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from specsim.errors import SpecsimInputError

_TOL = 1e-9


@dataclass(frozen=True)
class AcceptanceCounters:
    """Per-position acceptance derived from aggregate counters of a fixed-length drafting run.

    Attributes:
        name: label of the configuration (e.g. the CSV's ``config_id``).
        survival: (K,) s_k = P(drafts 1..k all accepted), non-increasing, in [0, 1].
        conditional: (K,) alpha_k = s_k / s_{k-1}, s_0 = 1 (NaN after a zero survival).
        mean_acceptance_length: 1 + sum_k s_k, tokens emitted per request-step incl. the bonus token.
        num_drafts: request-steps counted, when the source gives it.
        reported_mean_acceptance_length: the engine's own figure, when given (for cross-checking).
        source: file (and row) the counters came from.
    """

    name: str
    survival: np.ndarray
    conditional: np.ndarray
    mean_acceptance_length: float
    num_drafts: int | None = None
    reported_mean_acceptance_length: float | None = None
    source: str | None = None

    @property
    def num_spec_tokens(self) -> int:
        """K, the number of draft positions (gamma)."""
        return int(self.survival.size)

    @property
    def acceptance_rate(self) -> float:
        """Accepted drafts / drafted tokens = sum_k s_k / K (vLLM's ``acceptance rate``)."""
        return float(self.survival.sum() / self.survival.size)


def from_survival(survival, name: str = "counters", *, num_drafts: int | None = None,
                  reported_mean_acceptance_length: float | None = None, source: str | None = None,
                  line: int | None = None) -> AcceptanceCounters:
    """Build :class:`AcceptanceCounters` from per-position survival fractions s_1..s_K.

    Raises:
        SpecsimInputError: a value outside [0, 1] or not finite, or a survival that rises with k (the
            counters cannot come from fixed-length drafting: at an adaptive run's later positions the
            denominator is smaller than ``num_drafts``, so s_k / s_{k-1} is not a conditional rate).
    """
    s = np.asarray(survival, dtype=float).ravel()
    if s.size == 0 or not np.all(np.isfinite(s)) or np.any((s < 0) | (s > 1)):
        raise SpecsimInputError(source, line, "survival", "per-position fractions in [0, 1]",
                                str(s.round(4).tolist()))
    rises = np.flatnonzero(np.diff(s) > _TOL)
    if rises.size:
        k = int(rises[0]) + 1
        raise SpecsimInputError(
            source, line, f"position {k + 1}",
            "non-increasing survival (acceptance stops at the first rejection, so fixed-length counters "
            "never rise); rising survival means positions were not always drafted (adaptive-length run), "
            "and s_k / s_(k-1) is then not a conditional acceptance rate",
            f"s_{k} = {s[k - 1]:.4f} < s_{k + 1} = {s[k]:.4f}")
    prev = np.concatenate(([1.0], s[:-1]))                       # (K,) s_{k-1}
    with np.errstate(invalid="ignore", divide="ignore"):
        cond = np.where(prev > 0, s / prev, np.nan)
    return AcceptanceCounters(name, s, cond, float(1.0 + s.sum()), num_drafts,
                              reported_mean_acceptance_length, source)


def from_counts(num_drafts: int, accepted_per_pos, *, num_draft_tokens: int | None = None,
                drafts_per_pos=None, rel_tol: float = 0.0, name: str = "counters",
                source: str | None = None, line: int | None = None) -> AcceptanceCounters:
    """Build :class:`AcceptanceCounters` from raw engine counters (vLLM's spec-decode counters).

    Args:
        num_drafts: request-steps with drafts (vLLM ``num_drafts``).
        accepted_per_pos: (K,) request-steps whose draft at position k was accepted
            (vLLM ``num_accepted_tokens_per_pos``).
        num_draft_tokens: drafted tokens in total; must equal num_drafts * K (fixed-length drafting)
            within a relative ``rel_tol`` (default exact; a small tolerance admits static runs whose
            drafts were cut at the context limit).
        drafts_per_pos: (K,) request-steps that drafted position k, when the engine counts it; must be
            constant and equal to num_drafts.

    Raises:
        SpecsimInputError: counts negative or inconsistent, or an adaptive-length run (see module doc).
    """
    acc = np.asarray(accepted_per_pos, dtype=float).ravel()
    k = acc.size
    if num_drafts <= 0 or k == 0 or np.any(acc < 0) or np.any(acc > num_drafts):
        raise SpecsimInputError(source, line, "accepted_per_pos",
                                "0 <= accepted <= num_drafts, num_drafts >= 1",
                                f"num_drafts={num_drafts}, accepted={acc.astype(int).tolist()}")
    expected_tokens = int(num_drafts) * k
    off = None if num_draft_tokens is None else abs(int(num_draft_tokens) - expected_tokens)
    if off is not None and off > rel_tol * expected_tokens:
        raise SpecsimInputError(
            source, line, "num_draft_tokens",
            f"num_drafts * num_spec_tokens = {expected_tokens} (every step drafting all {k} positions); "
            "fewer drafted tokens means an adaptive-length run, whose per-position counters cannot be "
            "turned into conditional rates without each position's own draft count",
            str(int(num_draft_tokens)))
    if drafts_per_pos is not None:
        d = np.asarray(drafts_per_pos, dtype=float).ravel()
        if d.size != k or np.any(d != num_drafts):
            raise SpecsimInputError(
                source, line, "drafts_per_pos",
                f"{int(num_drafts)} at every position (positions always drafted); varying counts mean "
                "an adaptive-length run", str(d.astype(int).tolist()))
    return from_survival(acc / num_drafts, name, num_drafts=int(num_drafts), source=source, line=line)


def read_counters_csv(path: str | Path) -> list[AcceptanceCounters]:
    """Read a counters CSV, one configuration per row (format in the module docstring).

    Rows with ``accepted_tokens_pos*`` and ``num_drafts`` use :func:`from_counts`; otherwise the
    ``frac_drafts_accepting_pos*`` survival fractions are used.

    Raises:
        SpecsimInputError: unreadable file, no per-position columns, a row with fewer positions than
            ``num_spec_tokens``, or counters from an adaptive-length run (naming the row).
    """
    try:
        df = pd.read_csv(path)
    except (OSError, ValueError) as e:
        raise SpecsimInputError(str(path), None, None, "a counters CSV", str(e)[:80]) from None
    frac_cols = _pos_columns(df, "frac_drafts_accepting_pos")
    count_cols = _pos_columns(df, "accepted_tokens_pos")
    if not frac_cols and not count_cols:
        raise SpecsimInputError(str(path), 1, "frac_drafts_accepting_pos1",
                                "per-position columns frac_drafts_accepting_posK or accepted_tokens_posK")
    out = []
    for i, row in enumerate(df.to_dict("records")):
        line = i + 2                                            # header is line 1
        name = str(row.get("config_id", f"row{i + 1}"))
        k = int(row["num_spec_tokens"]) if pd.notna(row.get("num_spec_tokens")) else None
        reported = row.get("reported_mean_acceptance_length")
        reported = float(reported) if reported is not None and pd.notna(reported) else None
        if count_cols and pd.notna(row.get("num_drafts")):
            vals = _row_values(row, count_cols, k, str(path), line)
            ndt = row.get("num_draft_tokens")
            c = from_counts(int(row["num_drafts"]), vals,
                            num_draft_tokens=int(ndt) if ndt is not None and pd.notna(ndt) else None,
                            name=name, source=str(path), line=line)
            c = AcceptanceCounters(c.name, c.survival, c.conditional, c.mean_acceptance_length,
                                   c.num_drafts, reported, c.source)
        else:
            vals = _row_values(row, frac_cols, k, str(path), line)
            c = from_survival(vals, name, reported_mean_acceptance_length=reported, source=str(path),
                              line=line)
        out.append(c)
    return out


def _pos_columns(df: pd.DataFrame, prefix: str) -> list[str]:
    """Columns ``prefix1..prefixK`` in position order."""
    pat = re.compile(re.escape(prefix) + r"(\d+)$")
    found = {int(m.group(1)): c for c in df.columns if (m := pat.match(c))}
    return [found[k] for k in sorted(found)]


def _row_values(row: dict, cols: list[str], k: int | None, path: str, line: int) -> np.ndarray:
    """Per-position values of one row: the first K columns, all present."""
    cols = cols[:k] if k is not None else cols
    vals = np.array([row[c] for c in cols], dtype=float)
    if (k is not None and len(cols) < k) or np.any(np.isnan(vals)):
        missing = next((c for c, v in zip(cols, vals) if np.isnan(v)), f"position {len(cols) + 1}")
        raise SpecsimInputError(path, line, missing, f"a value for each of the {k or len(cols)} positions",
                                "missing")
    return vals


_PROM_LINE = re.compile(r'^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>[^}]*)\})?\s+(?P<value>\S+)')


def parse_vllm_metrics(text: str, source: str = "metrics", model_name: str | None = None
                       ) -> AcceptanceCounters:
    """Counters from a vLLM Prometheus ``/metrics`` text dump (summed over engines/labels).

    Reads ``vllm:spec_decode_num_drafts``, ``vllm:spec_decode_num_draft_tokens`` and
    ``vllm:spec_decode_num_accepted_tokens_per_pos{position="i"}`` (0-based positions), each with or
    without the Prometheus ``_total`` suffix. Counters are cumulative since server start: to measure one
    benchmark, subtract a dump taken before it (fields of the result are linear in the counts).

    Args:
        text: the exposition text.
        source: name for error messages.
        model_name: keep only samples with this ``model_name`` label (all when None).

    Raises:
        SpecsimInputError: a counter is missing, or the counters come from an adaptive-length run.
    """
    drafts, draft_tokens, per_pos = 0.0, None, {}
    seen_drafts = False
    for ln, raw in enumerate(text.splitlines(), start=1):
        m = _PROM_LINE.match(raw.strip())
        if not m or raw.lstrip().startswith("#"):
            continue
        labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group("labels") or ""))
        if model_name is not None and labels.get("model_name") not in (None, model_name):
            continue
        name = m.group("name").removesuffix("_total")
        try:
            value = float(m.group("value"))
        except ValueError:
            raise SpecsimInputError(source, ln, m.group("name"), "a number", m.group("value")) from None
        if name == "vllm:spec_decode_num_drafts":
            drafts += value
            seen_drafts = True
        elif name == "vllm:spec_decode_num_draft_tokens":
            draft_tokens = (draft_tokens or 0.0) + value
        elif name == "vllm:spec_decode_num_accepted_tokens_per_pos":
            pos = int(labels.get("position", -1))
            per_pos[pos] = per_pos.get(pos, 0.0) + value
    if not seen_drafts or not per_pos or min(per_pos) != 0 or sorted(per_pos) != list(range(len(per_pos))):
        raise SpecsimInputError(source, None, "vllm:spec_decode_num_accepted_tokens_per_pos",
                                "spec-decode counters num_drafts and accepted_tokens_per_pos for positions "
                                "0..K-1", f"positions {sorted(per_pos)}")
    acc = [per_pos[k] for k in range(len(per_pos))]
    return from_counts(int(round(drafts)), acc,
                       num_draft_tokens=None if draft_tokens is None else int(round(draft_tokens)),
                       name=model_name or "vllm", source=source)


#: Conditional rates are clipped into [RATE_FLOOR, 1 - RATE_FLOOR] in a rate table: 0 and 1 are not usable
#: latent-model rates, and a zero survival leaves the later positions undefined (NaN, replaced by the floor).
RATE_FLOOR = 1e-4


def load_counters(path: str | Path, *, domain: str = "chat", configs: Sequence[str] | None = None
                  ) -> dict[str, AcceptanceCounters]:
    """Read counters by file kind: a ``.csv`` counters file or a vLLM Prometheus ``/metrics`` text dump.

    Args:
        path: the file; a ``.csv`` suffix (any case) selects :func:`read_counters_csv`, anything else
            :func:`parse_vllm_metrics`.
        domain: the name given to the one configuration of a ``/metrics`` dump.
        configs: CSV ``config_id`` values to keep (all when ``None`` or empty); ignored for a dump.

    Returns:
        ``{name: counters}`` in file order; a CSV configuration measured twice (e.g. on two platforms)
        keeps both, the second as ``name-2``, the third as ``name-3``.

    Raises:
        SpecsimInputError: unreadable file, counters that cannot be converted (see the readers), or no
            configuration left after the ``configs`` filter.
    """
    path = Path(path)
    if path.suffix.lower() == ".csv":
        rows = [c for c in read_counters_csv(path) if not configs or c.name in configs]
        out: dict[str, AcceptanceCounters] = {}
        for c in rows:
            name, i = c.name, 2
            while name in out:
                name, i = f"{c.name}-{i}", i + 1
            out[name] = c
    else:
        try:
            text = path.read_text()
        except (OSError, UnicodeDecodeError) as e:
            raise SpecsimInputError(str(path), None, None, "a readable /metrics dump", str(e)[:60]) from None
        out = {domain: parse_vllm_metrics(text, source=str(path))}
    if not out:
        raise SpecsimInputError(str(path), None, "config", "at least one configuration",
                                f"none of {list(configs or [])} found")
    return out


def rate_table(counters: Mapping[str, AcceptanceCounters], source: str) -> dict:
    """The rate table of ``acceptance.table``: ``{"alpha": {name: [alpha_1..alpha_K]}, ...}``.

    Args:
        counters: ``{domain or config name: counters}``, e.g. from :func:`load_counters`.
        source: the file name recorded in the table (a name, never a machine path).

    Returns:
        A JSON-ready dict: ``alpha`` (per name, the K conditional rates rounded to 6 decimals and clipped
        into [:data:`RATE_FLOOR`, 1 - RATE_FLOOR], NaN to the floor), ``source``, ``method`` and
        ``mean_acceptance_length`` (per name, 1 + sum_k s_k, unclipped).
    """
    alpha = {}
    for name, c in counters.items():
        cond = np.asarray(c.conditional, dtype=float)                    # (K,)
        if not np.all(np.isfinite(cond) & (cond > 0) & (cond < 1)):
            cond = np.clip(np.nan_to_num(cond, nan=RATE_FLOOR), RATE_FLOOR, 1 - RATE_FLOOR)
        alpha[name] = [round(float(x), 6) for x in cond]
    return {"alpha": alpha, "source": source,
            "method": "conditional rates alpha_k = s_k / s_(k-1) from survival counters (specsim.counters)",
            "mean_acceptance_length": {n: c.mean_acceptance_length for n, c in counters.items()}}
