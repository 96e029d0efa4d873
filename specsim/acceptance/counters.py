"""Import aggregate per-position acceptance counters, as serving engines expose them.

Engines rarely log per-step outcomes; they keep counters. vLLM (``vllm/v1/spec_decode/metrics.py``)
counts, over all verification steps of a run: ``num_drafts`` (request-steps that carried drafts),
``num_draft_tokens`` (drafted tokens), ``num_accepted_tokens`` and ``num_accepted_tokens_per_pos[k]``
(request-steps whose draft at position k was accepted). Acceptance stops at the first rejection, so
position k is accepted iff drafts 1..k all are: the per-position counter divided by ``num_drafts`` is the
**survival** s_k = P(accepted length >= k) (data/SOURCES.md section 3). From it:

- conditional acceptance alpha_k = s_k / s_{k-1} (s_0 = 1), the DESIGN.md alpha_k, pooled over steps
  as the DSpark paper's Fig. 2 measures it (§4.3.1);
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
        SpecsimInputError: unreadable or malformed file, no data row, no per-position columns, a
            ``num_spec_tokens`` that is not an int >= 1, a row with fewer positions than
            ``num_spec_tokens``, a count or fraction that is not a finite number, or counters from an
            adaptive-length run (naming the line).
    """
    src = str(path)
    try:
        df = pd.read_csv(path, dtype=str, keep_default_na=False)
    except (OSError, ValueError, pd.errors.ParserError, pd.errors.EmptyDataError) as e:
        raise SpecsimInputError(src, None, None, SUPPORTED_FORMATS, " ".join(str(e).split())[:80]) from None
    frac_cols = _pos_columns(df, "frac_drafts_accepting_pos")
    count_cols = _pos_columns(df, "accepted_tokens_pos")
    if not frac_cols and not count_cols:
        raise SpecsimInputError(src, 1, "frac_drafts_accepting_pos1",
                                "per-position columns frac_drafts_accepting_posK or accepted_tokens_posK",
                                f"columns {list(df.columns)[:6]}")
    if len(df) == 0:
        raise SpecsimInputError(src, 2, None, "at least one configuration row", "only a header")
    out = []
    for i, row in enumerate(df.to_dict("records")):
        line = i + 2                                            # header is line 1
        name = str(row.get("config_id") or f"row{i + 1}")
        k = _cell(row, "num_spec_tokens", src, line, count=True)
        k = None if k is None else int(k)
        reported = _cell(row, "reported_mean_acceptance_length", src, line)
        num_drafts = _cell(row, "num_drafts", src, line, count=True) if count_cols else None
        if num_drafts is not None:
            vals = _row_values(row, count_cols, k, src, line)
            ndt = _cell(row, "num_draft_tokens", src, line, count=True)
            c = from_counts(int(num_drafts), vals, num_draft_tokens=None if ndt is None else int(ndt),
                            name=name, source=src, line=line)
            c = AcceptanceCounters(c.name, c.survival, c.conditional, c.mean_acceptance_length,
                                   c.num_drafts, reported, c.source)
        elif frac_cols:
            vals = _row_values(row, frac_cols, k, src, line)
            c = from_survival(vals, name, reported_mean_acceptance_length=reported, source=src, line=line)
        else:
            raise SpecsimInputError(src, line, "num_drafts", "a count with the accepted_tokens_posK columns",
                                    "an empty cell")
        out.append(c)
    return out


def _cell(row: dict, col: str, src: str, line: int, count: bool = False) -> float | None:
    """One optional numeric cell: None when absent or empty; a finite number (an int >= 1 if ``count``)."""
    text = row.get(col)
    if text is None or str(text).strip() == "":
        return None
    try:
        v = float(text)
    except ValueError:
        v = float("nan")
    ok = np.isfinite(v) and (not count or (v >= 1 and v.is_integer() and v <= 2**53))
    if not ok:
        raise SpecsimInputError(src, line, col, "an int >= 1" if count else "a finite number", repr(text))
    return v


def _pos_columns(df: pd.DataFrame, prefix: str) -> list[str]:
    """Columns ``prefix1..prefixK`` in position order."""
    pat = re.compile(re.escape(prefix) + r"([0-9]+)$")
    found = {int(m.group(1)): c for c in df.columns if (m := pat.match(str(c)))}
    return [found[k] for k in sorted(found)]


def _row_values(row: dict, cols: list[str], k: int | None, path: str, line: int) -> np.ndarray:
    """(K,) per-position values of one row: the first K columns, all present and finite numbers."""
    cols = cols[:k] if k is not None else cols
    if k is not None and len(cols) < k:
        raise SpecsimInputError(path, line, f"position {len(cols) + 1}",
                                f"a value for each of the {k} positions (num_spec_tokens)", "no such column")
    vals = []
    for c in cols:
        v = _cell(row, c, path, line)
        if v is None:
            raise SpecsimInputError(path, line, c, f"a value for each of the {len(cols)} positions", "an empty cell")
        vals.append(v)
    return np.array(vals, dtype=np.float64)


#: The inputs ``specsim counters`` reads, in words (error messages name them).
SUPPORTED_FORMATS = ("a counters CSV (.csv, columns frac_drafts_accepting_posK or accepted_tokens_posK) "
                     "or a vLLM Prometheus /metrics text dump (vllm:spec_decode_* counters)")


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
        if not name.startswith("vllm:spec_decode_num_"):
            continue
        value = _sample_value(m.group("value"), source, ln, m.group("name"))
        if name == "vllm:spec_decode_num_drafts":
            drafts += value
            seen_drafts = True
        elif name == "vllm:spec_decode_num_draft_tokens":
            draft_tokens = (draft_tokens or 0.0) + value
        elif name == "vllm:spec_decode_num_accepted_tokens_per_pos":
            pos = labels.get("position", "")
            if not re.fullmatch(r"[0-9]{1,4}", pos):
                raise SpecsimInputError(source, ln, m.group("name"), 'a label position="K", K an int in [0, 9999]',
                                        repr(pos) if "position" in labels else "no position label")
            per_pos[int(pos)] = per_pos.get(int(pos), 0.0) + value
    _check_metric_positions(text, source, seen_drafts, per_pos)
    acc = [per_pos[k] for k in range(len(per_pos))]
    return from_counts(int(round(drafts)), acc,
                       num_draft_tokens=None if draft_tokens is None else int(round(draft_tokens)),
                       name=model_name or "vllm", source=source)


def _sample_value(text: str, source: str, line: int, name: str) -> float:
    """A counter sample's value: a finite number >= 0 (counters never go negative)."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not (np.isfinite(value) and 0 <= value <= 2**53):
        raise SpecsimInputError(source, line, name, "a counter value, a finite number in [0, 2^53]", repr(text))
    return value


def _check_metric_positions(text: str, source: str, seen_drafts: bool, per_pos: dict) -> None:
    """Raise unless a dump had ``num_drafts`` and accepted counts for positions 0..K-1, saying what it had."""
    if not seen_drafts and not per_pos:
        head = text.lstrip()[:1]
        kind = ("JSON, which is not a supported input" if head in ("{", "[")
                else "no vllm:spec_decode_* counter samples")
        raise SpecsimInputError(source, None, None, SUPPORTED_FORMATS, kind)
    if not seen_drafts:
        raise SpecsimInputError(source, None, "vllm:spec_decode_num_drafts",
                                "the num_drafts counter beside the per-position counters", "no sample")
    if sorted(per_pos) != list(range(len(per_pos))):
        got = (f"positions {', '.join(str(k) for k in sorted(per_pos))}" if per_pos else "no sample")
        raise SpecsimInputError(source, None, "vllm:spec_decode_num_accepted_tokens_per_pos",
                                "samples for every draft position 0..K-1 (0-based)", got)


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
            got = ("bytes that are not UTF-8 text" if isinstance(e, UnicodeDecodeError)
                   else " ".join(str(e.strerror or e).split())[:60])
            raise SpecsimInputError(str(path), None, None, SUPPORTED_FORMATS, got) from None
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
        ``mean_acceptance_length`` (per name, 1 + sum_k s_k, unclipped) and ``acceptance_rate`` (per
        name, accepted / drafted tokens = sum_k s_k / K, unclipped; vLLM's "acceptance rate").
    """
    alpha = {}
    for name, c in counters.items():
        cond = np.asarray(c.conditional, dtype=float)                    # (K,)
        if not np.all(np.isfinite(cond) & (cond > 0) & (cond < 1)):
            cond = np.clip(np.nan_to_num(cond, nan=RATE_FLOOR), RATE_FLOOR, 1 - RATE_FLOOR)
        alpha[name] = [round(float(x), 6) for x in cond]
    return {"alpha": alpha, "source": source,
            "method": "conditional rates alpha_k = s_k / s_(k-1) from survival counters (specsim.acceptance.counters)",
            "mean_acceptance_length": {n: c.mean_acceptance_length for n, c in counters.items()},
            "acceptance_rate": {n: c.acceptance_rate for n, c in counters.items()}}
