"""Per-position acceptance in and out of the engines' and evaluators' own formats.

specsim's acceptance model is conditional (alpha_k, DESIGN.md "Acceptance statistics"); the tools around it
publish prefix **survival** s_k = P(drafts 1..k all accepted) or per-step accepted lengths. The conversion is
alpha_k = s_k / s_(k-1) (s_0 = 1), and it holds only when every step verified all K positions (fixed-length
drafting): with adaptive lengths the denominator of position k is the number of steps that *drafted* k, and an
input that does not hold those counts is refused with the reason (:mod:`specsim.acceptance.counters`).

Readers (each returns ``{domain or configuration: AcceptanceCounters}``):

* :func:`read_vllm_bench_result`: a ``vllm bench serve --save-result`` JSON. Its speculative fields, as
  ``vllm/benchmarks/serve.py`` writes them (vllm-project/vllm commit 009e6d4a1cd6): ``spec_decode_num_drafts``,
  ``spec_decode_draft_tokens``, ``spec_decode_accepted_tokens``, ``spec_decode_acceptance_rate`` (percent,
  accepted / drafted tokens), ``spec_decode_acceptance_length`` (1 + accepted / drafts) and
  ``spec_decode_per_position_acceptance_rates`` (position k's accepted count / ``num_drafts``, i.e. survival).
* :func:`read_deepspec_eval`: DeepSpec's evaluator output (deepseek-ai/DeepSpec ``deepspec/eval/base_evaluator.py``,
  commit 3bc8dc7452b5): the printed table (PrettyTable or the tab-separated fallback; columns ``dataset``,
  ``#propose`` = "draft tokens per proposal+1", ``accept_len``, ``verify_rate``, ``accept_rate@0..K-1``) or its
  metrics rows as JSON/JSONL (``dataset``, ``draft_tokens_per_proposal``, ``acceptance_length``, ``verify_rate``,
  ``accept_rates_by_position``). ``accept_rate@k`` is accepted / proposals at 0-based position k: survival only when
  every proposal had all K positions (``#propose`` == K), which is checked.
* :func:`read_specbench_answers`: Spec-Bench answer JSONL (hemingkx/Spec-Bench ``evaluation/eval.py``): one line per
  question with ``category`` and ``choices[i].accept_lengths``, the tokens emitted at each decoding step (the
  target's own token included: Spec-Bench's "#Mean accepted tokens"). The trace does not say how many positions a
  step verified, so the caller must give K (``num_spec_tokens``); survival s_k = steps emitting > k tokens / steps.
* :func:`read_vllm_synthetic`: the file :func:`export_acceptance` writes (vLLM's ``synthetic_acceptance_rates``).

Export (:func:`export_acceptance`): per domain, the ``--speculative-config`` fragment of vLLM's synthetic rejection
sampler (``rejection_sample_method = "synthetic"``, ``synthetic_acceptance_rates`` = survival s_1..s_K, length K,
non-increasing; checked against ``vllm/config/speculative.py`` at vllm-project/vllm commit 002e77c1f0ef, see
:data:`VLLM_CHECKED`), ``synthetic_acceptance_length`` = 1 + sum_k s_k (vLLM turns a length alone into its own
step-shaped schedule 1, .., 1, frac, 0, .., so only the rates carry the per-position shape), and DeepSpec's names
(``accept_len``, ``verify_rate``, ``accept_rate@k``) beside them. :func:`run_acceptance` measures a run's
per-position acceptance from its step log; :func:`acceptance_report` is the ``summary.json`` block.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from specsim.acceptance.counters import AcceptanceCounters, from_counts, from_survival
from specsim.errors import SpecsimInputError
from specsim.jsonfiles import json_document, json_rows, read_text

#: The vLLM source the export was checked against (no release number was verified for these keys).
VLLM_CHECKED = {
    "repository": "vllm-project/vllm",
    "synthetic_keys": "vllm/config/speculative.py at commit 002e77c1f0ef9b19cff8b9e21cfbd6feb3d6b443 "
                      "(SpeculativeConfig.rejection_sample_method, synthetic_acceptance_rates, "
                      "synthetic_acceptance_length)",
    "bench_keys": "vllm/benchmarks/serve.py at commit 009e6d4a1cd6ba3fb2a9fc00f4ec06f5297232a1 (spec_decode_* fields)",
}

#: Relative tolerance on "every proposal drafted all K positions" for inputs that print rounded figures
#: (DeepSpec's table prints #propose with 2 decimals; a static run's last proposal may be cut by a stop token).
PROPOSAL_REL_TOL = 0.01

FORMATS = ("vllm-bench", "deepspec", "specbench", "vllm-synthetic")


def _read_text(path: Path) -> str:
    return read_text(path, "a readable text file")


def _json(text: str, src: str):
    return json_document(text, src, "a JSON document")


def _json_lines(text: str, src: str) -> list[tuple[int, object]]:
    """A JSON document as one row, else JSON Lines as (1-based line, object) pairs."""
    return json_rows(text, src, "one JSON object per line")


def _number(obj: Mapping, key: str, src: str, line: int | None, *, count: bool = False) -> float:
    v = obj.get(key)
    ok = isinstance(v, (int, float)) and not isinstance(v, bool) and np.isfinite(v) and v >= 0
    if ok and count:
        ok = float(v).is_integer() and v >= 1
    if not ok:
        want = "an int >= 1" if count else "a finite number >= 0"
        raise SpecsimInputError(src, line, key, want, "no such field" if key not in obj else repr(v))
    return float(v)


# ----------------------------------------------------------------------------------------- vllm bench serve
def read_vllm_bench_result(path: str | Path, name: str | None = None) -> dict[str, AcceptanceCounters]:
    """Per-position acceptance from a ``vllm bench serve --save-result`` JSON (fields: module docstring).

    Args:
        path: the result JSON (one object).
        name: the configuration's name (default: the result's ``label``, else ``model_id``, else ``vllm``).

    Returns:
        ``{name: counters}`` (a bench result has no domains).

    Raises:
        SpecsimInputError: not a JSON object; no ``spec_decode_per_position_acceptance_rates`` (or an empty one:
            the scalar rate and length do not determine per-position survival); ``spec_decode_draft_tokens`` !=
            ``spec_decode_num_drafts`` x K (an adaptive-length run, whose per-position draft counts the result
            lacks); ``spec_decode_accepted_tokens`` disagreeing with num_drafts x sum_k s_k by more than 1%.
    """
    src = str(path)
    doc = _json(_read_text(Path(path)), src)
    if not isinstance(doc, dict):
        raise SpecsimInputError(src, 1, None, "a vllm bench serve result (one JSON object)", type(doc).__name__)
    rates = doc.get("spec_decode_per_position_acceptance_rates")
    if not isinstance(rates, list) or not rates:
        raise SpecsimInputError(
            src, None, "spec_decode_per_position_acceptance_rates",
            "a non-empty list of per-position rates (vLLM writes it when the server exposes "
            "vllm:spec_decode_num_accepted_tokens_per_pos); spec_decode_acceptance_rate and _length alone do "
            "not determine the per-position model", "no such field" if rates is None else repr(rates)[:40])
    num_drafts = _number(doc, "spec_decode_num_drafts", src, None, count=True)
    draft_tokens = _number(doc, "spec_decode_draft_tokens", src, None, count=True)
    k = len(rates)
    s = np.asarray([_rate(r, src, None, f"spec_decode_per_position_acceptance_rates[{i}]")
                    for i, r in enumerate(rates)], dtype=float)
    if not np.all(np.isfinite(s)):
        raise SpecsimInputError(src, None, "spec_decode_per_position_acceptance_rates",
                                "a rate in [0, 1] at every position", repr(rates)[:60])
    label = name or str(doc.get("label") or doc.get("model_id") or "vllm")
    from_counts(int(num_drafts), np.round(s * num_drafts), num_draft_tokens=int(draft_tokens), name=label,
                source=src)                                   # refuses an adaptive-length run
    reported = doc.get("spec_decode_acceptance_length")
    c = from_survival(s, label, num_drafts=int(num_drafts), source=src,
                      reported_mean_acceptance_length=float(reported) if isinstance(reported, (int, float)) else None)
    if "spec_decode_accepted_tokens" in doc:
        acc = _number(doc, "spec_decode_accepted_tokens", src, None)
        expect = num_drafts * float(s.sum())
        if abs(acc - expect) > 0.01 * max(expect, 1.0) + 0.5:
            raise SpecsimInputError(src, None, "spec_decode_accepted_tokens",
                                    f"num_drafts x sum of the {k} per-position rates = {expect:.1f}", f"{acc:g}")
    return {label: c}


# ----------------------------------------------------------------------------------------- DeepSpec evaluator
def read_deepspec_eval(path: str | Path, rel_tol: float = PROPOSAL_REL_TOL) -> dict[str, AcceptanceCounters]:
    """Per-domain acceptance from DeepSpec evaluator output (table or JSON rows, module docstring).

    Each row's ``dataset`` names the domain; its ``accept_rate@0..K-1`` are survivals s_1..s_K when every
    proposal drafted all K positions.

    Args:
        path: the printed table (``+--+`` borders and ``|`` cells, or tab-separated) or JSON / JSONL rows.
        rel_tol: allowed relative shortfall of draft tokens per proposal below K (stop-token cuts, rounding).

    Raises:
        SpecsimInputError: no row; a row without per-position rates; ``#propose`` below K beyond ``rel_tol``
            (adaptive-length proposals: accept_rate@k then divides by the proposals at k, which the output does
            not print, so consecutive ratios are not conditional rates); a rate that is not a number in [0, 1].
    """
    src = str(path)
    text = _read_text(Path(path))
    rows = _deepspec_json_rows(text, src) if text.lstrip()[:1] in ("{", "[") else _deepspec_table_rows(text, src)
    if not rows:
        raise SpecsimInputError(src, None, None, "at least one DeepSpec result row", "none")
    out = {}
    for line, row in rows:
        name, propose, rates, accept_len = row
        k = next((i for i, r in enumerate(rates) if r is None), len(rates))   # positions ever proposed
        present = rates[:k]
        if k == 0 or any(r is not None for r in rates[k:]):
            raise SpecsimInputError(src, line, "accept_rate@0", "rates at positions 0..K-1, K >= 1, none missing "
                                    "before the last", repr(rates))
        if propose < k * (1 - rel_tol):
            raise SpecsimInputError(
                src, line, "#propose",
                f"{k} draft tokens per proposal (every proposal drafting all {k} positions): accept_rate@k is "
                "accepted / proposals at position k, and the evaluator does not print those proposal counts, so "
                "with adaptive proposal lengths consecutive ratios are not conditional rates",
                f"{propose:g}")
        out[name] = from_survival(present, name, reported_mean_acceptance_length=accept_len, source=src, line=line)
    return out


def _deepspec_json_rows(text: str, src: str) -> list[tuple[int, tuple]]:
    rows = []
    for line, obj in _json_lines(text, src):
        if not isinstance(obj, dict):
            raise SpecsimInputError(src, line, None, "a DeepSpec metrics row (JSON object)", type(obj).__name__)
        rates = obj.get("accept_rates_by_position")
        if not isinstance(rates, list):
            raise SpecsimInputError(src, line, "accept_rates_by_position", "a list of per-position rates",
                                    "no such field" if rates is None else repr(rates)[:40])
        rates = [_rate(r, src, line, f"accept_rates_by_position[{i}]") for i, r in enumerate(rates)]
        propose = _number(obj, "draft_tokens_per_proposal", src, line)
        accept_len = obj.get("acceptance_length")
        rows.append((line, (str(obj.get("dataset", f"row{len(rows) + 1}")), propose, rates,
                            float(accept_len) if isinstance(accept_len, (int, float)) else None)))
    return rows


def _rate(v, src: str, line: int, field: str) -> float | None:
    """A per-position rate in [0, 1], or None where the evaluator had no proposal (None, "-")."""
    if v is None or v == "-":
        return None
    try:
        x = float(v)
    except (TypeError, ValueError):
        x = float("nan")
    if not (np.isfinite(x) and 0 <= x <= 1):
        raise SpecsimInputError(src, line, field, "a rate in [0, 1] (or '-')", repr(v))
    return x


def _deepspec_table_rows(text: str, src: str) -> list[tuple[int, tuple]]:
    header, rows = None, []
    for ln, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip() or raw.lstrip().startswith("+"):
            continue
        cells = ([c.strip() for c in raw.strip().strip("|").split("|")] if "|" in raw
                 else [c.strip() for c in raw.split("\t")])
        if header is None:
            if "accept_len" not in cells:
                continue                                    # log lines before the table
            header = cells
            continue
        if len(cells) != len(header):
            raise SpecsimInputError(src, ln, None, f"{len(header)} cells as in the header", f"{len(cells)}")
        rows.append((ln, _table_row(dict(zip(header, cells)), header, src, ln)))
    if header is None:
        raise SpecsimInputError(src, None, "accept_len", "a DeepSpec result table (header with dataset, #propose, "
                                "accept_len, verify_rate, accept_rate@0..) or JSON metrics rows", "no such header")
    return rows


def _table_row(row: dict, header: list[str], src: str, ln: int) -> tuple:
    pos = sorted((int(m.group(1)), c) for c in header if (m := re.fullmatch(r"accept_rate@([0-9]+)", c)))
    rates = [_rate(row[c], src, ln, c) for _, c in pos]
    m = re.fullmatch(r"([0-9.]+)\+1", row.get("#propose", ""))
    if not m:
        raise SpecsimInputError(src, ln, "#propose", "draft tokens per proposal written 'X.XX+1'",
                                repr(row.get("#propose")))
    try:
        accept_len = float(row["accept_len"])
    except ValueError:
        raise SpecsimInputError(src, ln, "accept_len", "a number", repr(row["accept_len"])) from None
    return (row.get("dataset") or f"row{ln}", float(m.group(1)), rates, accept_len)


# ----------------------------------------------------------------------------------------- Spec-Bench traces
def read_specbench_answers(path: str | Path, num_spec_tokens: int | None,
                           domain_field: str = "category") -> dict[str, AcceptanceCounters]:
    """Per-domain acceptance from Spec-Bench answer JSONL (per-step accepted lengths, module docstring).

    Args:
        path: the answer file, one JSON object per line.
        num_spec_tokens: K, the positions every step verified (the trace does not hold it).
        domain_field: the field naming a line's domain (Spec-Bench: ``category``).

    Raises:
        SpecsimInputError: ``num_spec_tokens`` missing (the trace lacks per-step verified counts, so K must be
            given); a line without ``choices[].accept_lengths``; a length outside [1, K + 1].
    """
    src = str(path)
    if num_spec_tokens is None or num_spec_tokens < 1:
        raise SpecsimInputError(src, None, "--num-spec-tokens",
                                "K, the draft positions every step verified: a Spec-Bench trace records the tokens "
                                "emitted per step but not how many positions each step verified",
                                "not given" if num_spec_tokens is None else str(num_spec_tokens))
    k = int(num_spec_tokens)
    per_dom: dict[str, list[np.ndarray]] = {}
    for line, obj in _json_lines(_read_text(Path(path)), src):
        choices = obj.get("choices") if isinstance(obj, dict) else None
        if not isinstance(choices, list) or not choices:
            raise SpecsimInputError(src, line, "choices", "a non-empty list of answers with accept_lengths",
                                    "no such field" if choices is None else repr(choices)[:40])
        dom = str(obj.get(domain_field, "chat"))
        for ch in choices:
            lens = ch.get("accept_lengths") if isinstance(ch, dict) else None
            arr = np.asarray(lens if isinstance(lens, list) else [np.nan], dtype=float)
            if arr.size == 0 or not np.all(np.isfinite(arr) & (arr == np.round(arr)) & (arr >= 1) & (arr <= k + 1)):
                raise SpecsimInputError(src, line, "accept_lengths",
                                        f"a list of ints in [1, K + 1 = {k + 1}] (tokens emitted per step)",
                                        repr(lens)[:60])
            per_dom.setdefault(dom, []).append(arr)
    if not per_dom:
        raise SpecsimInputError(src, None, None, "at least one answer line", "none")
    out = {}
    for dom, parts in per_dom.items():
        accepted = np.concatenate(parts) - 1                                  # (steps,) accepted drafts
        per_pos = (accepted[:, None] >= np.arange(1, k + 1)).sum(axis=0)       # (K,) steps accepting position k
        out[dom] = from_counts(int(accepted.size), per_pos, num_draft_tokens=int(accepted.size) * k,
                               name=dom, source=src)
    return out


# ----------------------------------------------------------------------------------------- vLLM synthetic
def read_vllm_synthetic(path: str | Path) -> dict[str, AcceptanceCounters]:
    """Read back :func:`export_acceptance`'s file, or one ``--speculative-config`` object with
    ``synthetic_acceptance_rates`` (named ``vllm``).

    Raises:
        SpecsimInputError: no ``synthetic_acceptance_rates``; rates that vLLM itself would refuse (length other than
            ``num_speculative_tokens``, outside [0, 1], rising).
    """
    src = str(path)
    doc = _json(_read_text(Path(path)), src)
    configs = doc.get("speculative_config") if isinstance(doc, dict) else None
    if configs is None and isinstance(doc, dict) and "synthetic_acceptance_rates" in doc:
        configs = {"vllm": doc}
    if not isinstance(configs, dict) or not configs:
        raise SpecsimInputError(src, None, "synthetic_acceptance_rates",
                                "a vLLM speculative config with synthetic_acceptance_rates, or specsim's export "
                                "({'speculative_config': {domain: {...}}})", "none")
    out = {}
    for dom, cfg in configs.items():
        rates = cfg.get("synthetic_acceptance_rates") if isinstance(cfg, dict) else None
        if not isinstance(rates, list) or not rates:
            raise SpecsimInputError(src, None, f"{dom}.synthetic_acceptance_rates", "a non-empty list", repr(rates))
        k = cfg.get("num_speculative_tokens", len(rates))
        if k != len(rates):
            raise SpecsimInputError(src, None, f"{dom}.synthetic_acceptance_rates",
                                    f"num_speculative_tokens = {k} rates (vLLM's rule)", f"{len(rates)}")
        out[str(dom)] = from_survival(rates, str(dom), source=src)
    return out


def load_acceptance(path: str | Path, fmt: str, *, num_spec_tokens: int | None = None,
                    name: str | None = None) -> dict[str, AcceptanceCounters]:
    """Read ``path`` in format ``fmt`` (one of :data:`FORMATS`) into ``{domain: counters}``."""
    if fmt == "vllm-bench":
        return read_vllm_bench_result(path, name)
    if fmt == "deepspec":
        return read_deepspec_eval(path)
    if fmt == "specbench":
        return read_specbench_answers(path, num_spec_tokens)
    if fmt == "vllm-synthetic":
        return read_vllm_synthetic(path)
    raise SpecsimInputError(str(path), None, "--format", f"one of {', '.join(FORMATS)}", repr(fmt))


# ----------------------------------------------------------------------------------------- export
def deepspec_metrics(survival) -> dict[str, float]:
    """DeepSpec's names for a fixed-length drafter's per-position survival s_1..s_K.

    ``accept_len`` = 1 + sum_k s_k (tokens per step, bonus included); ``verify_rate`` = emitted tokens /
    (verified drafts + steps) = accept_len / (K + 1); ``accept_rate@k`` = s_(k+1) (0-based, as DeepSpec prints).
    """
    s = np.asarray(survival, float)
    accept_len = float(1.0 + s.sum())
    out = {"accept_len": accept_len, "verify_rate": accept_len / (s.size + 1)}
    out.update({f"accept_rate@{i}": float(x) for i, x in enumerate(s)})
    return out


def export_acceptance(counters: Mapping[str, AcceptanceCounters], source: str) -> dict:
    """vLLM's synthetic-acceptance settings and DeepSpec's metric names, per domain (module docstring).

    Args:
        counters: ``{domain: counters}`` (from a reader, :func:`model_counters` or :func:`run_acceptance`).
        source: what the acceptance came from (a name, never a machine path).

    Returns:
        A JSON-ready dict: ``speculative_config`` (per domain: ``rejection_sample_method``,
        ``num_speculative_tokens``, ``synthetic_acceptance_rates``), ``synthetic_acceptance_length`` (per domain),
        ``deepspec`` (per domain, :func:`deepspec_metrics`), ``conditional`` (per domain, alpha_k), ``source`` and
        ``vllm_checked`` (:data:`VLLM_CHECKED`).
    """
    out = {"speculative_config": {}, "synthetic_acceptance_length": {}, "deepspec": {}, "conditional": {},
           "source": source, "vllm_checked": VLLM_CHECKED,
           "note": "pass synthetic_acceptance_rates (per-position survival) or synthetic_acceptance_length, never "
                   "both (vLLM refuses both); a length alone becomes vLLM's step-shaped schedule, not this shape"}
    for dom, c in counters.items():
        s = [round(float(x), 6) for x in np.minimum.accumulate(np.clip(c.survival, 0.0, 1.0))]
        out["speculative_config"][dom] = {"rejection_sample_method": "synthetic",
                                          "num_speculative_tokens": len(s), "synthetic_acceptance_rates": s}
        out["synthetic_acceptance_length"][dom] = float(1.0 + sum(s))
        out["deepspec"][dom] = deepspec_metrics(s)
        out["conditional"][dom] = [None if not np.isfinite(a) else float(a) for a in c.conditional]
    return out


def model_counters(alpha: Mapping[str, object], gamma: int | None = None, source: str = "model"
                   ) -> dict[str, AcceptanceCounters]:
    """Per-domain counters of a conditional-rate model (``AcceptanceModel.alpha`` or a rate table's ``alpha``):
    s_k = alpha_1 x ... x alpha_k over the first ``gamma`` positions (all when None)."""
    out = {}
    for dom, rates in alpha.items():
        a = np.asarray(rates, float)[:gamma]                          # (K,) conditional rates
        out[str(dom)] = from_survival(np.cumprod(a), str(dom), source=source)
    return out


def run_acceptance(step_log: pd.DataFrame) -> dict[str, dict]:
    """A run's per-position acceptance from its step log (:mod:`specsim.acceptance.steplog`), per domain and ``all``.

    For position k (1-based): ``verified`` = request-steps with verify_len >= k; ``accepted`` = those with
    num_accepted >= k; DeepSpec's ``accept_rate@(k-1)`` = accepted / verified (its own definition);
    the conditional rate alpha_k = accepted_k / request-steps with num_accepted >= k-1 and verify_len >= k
    (positions reached and verified), and the survival s_k = alpha_1 ... alpha_k. With fixed-length verification
    the two coincide; with an adaptive policy s_k assumes acceptance does not depend on the choice to verify
    (a confidence-based policy verifies likelier drafts, so s_k then leans high).

    Returns:
        ``{domain: {"num_drafts", "verified_per_pos", "accepted_per_pos", "accept_rate_at_pos", "conditional",
        "survival"}}`` (lists of length gamma; None where nothing was verified).
    """
    rows = step_log[step_log.verify_len > 0]
    gamma = int(step_log.gamma.max()) if len(step_log) else 0
    groups = [("all", rows)] + [(str(d), g) for d, g in rows.groupby("domain", sort=True)]
    out = {}
    for dom, g in groups:
        ver = g.verify_len.to_numpy()[:, None] >= np.arange(1, gamma + 1)            # (n, gamma)
        acc = g.num_accepted.to_numpy()[:, None] >= np.arange(1, gamma + 1)         # (n, gamma)
        reached = g.num_accepted.to_numpy()[:, None] >= np.arange(0, gamma)          # (n, gamma) k-1 accepted
        n_ver, n_acc, n_reach = ver.sum(0), (acc & ver).sum(0), (reached & ver).sum(0)
        with np.errstate(invalid="ignore", divide="ignore"):
            rate = np.where(n_ver > 0, n_acc / n_ver, np.nan)
            cond = np.where(n_reach > 0, n_acc / n_reach, np.nan)
        surv = np.cumprod(np.nan_to_num(cond, nan=0.0))
        out[dom] = {"num_drafts": int(len(g)), "verified_per_pos": n_ver.tolist(), "accepted_per_pos": n_acc.tolist(),
                    "accept_rate_at_pos": _nones(rate), "conditional": _nones(cond), "survival": _nones(surv)}
    return out


def _nones(a: np.ndarray) -> list:
    return [None if not np.isfinite(x) else float(x) for x in a]


def acceptance_report(step_log: pd.DataFrame | None, steps: pd.DataFrame) -> dict:
    """The ``summary.json`` block: vLLM's ``spec_decode_*`` names and DeepSpec's names for one run.

    vLLM's keys follow :func:`specsim.analysis.results.vllm_result` (every request-step is one draft):
    ``spec_decode_acceptance_rate`` (percent, accepted / verified drafts), ``spec_decode_acceptance_length``
    (1 + accepted / request-steps), ``spec_decode_num_drafts``, ``spec_decode_draft_tokens``,
    ``spec_decode_accepted_tokens`` from the step frame; with a step log,
    ``spec_decode_per_position_acceptance_rates`` (request-steps accepting position k / request-steps).
    DeepSpec's: ``accept_len`` (tokens per request-step, bonus included; every decode step is a proposal, as in
    DeepSpec's loop), ``verify_rate`` (emitted / (verified drafts + request-steps)) and, with a step log,
    ``accept_rate@k`` (its own definition, :func:`run_acceptance`). With a step log, also the
    ``synthetic_acceptance_rates`` to replay the run's acceptance on vLLM (:func:`run_acceptance` survival).
    """
    req_steps = float(steps.num_decode.sum()) if len(steps) else 0.0
    verified = float(steps.verified_drafts.sum()) if len(steps) else 0.0
    accepted = float(steps.accepted_drafts.sum()) if len(steps) else 0.0
    length = (req_steps + accepted) / req_steps if req_steps else None
    vllm = {"spec_decode_acceptance_rate": 100.0 * accepted / verified if verified else None,
            "spec_decode_acceptance_length": length, "spec_decode_num_drafts": int(req_steps),
            "spec_decode_draft_tokens": int(verified), "spec_decode_accepted_tokens": int(accepted)}
    deep = {"accept_len": length, "verify_rate": (req_steps + accepted) / (verified + req_steps) if req_steps else None}
    out = {"vllm": vllm, "deepspec": deep, "vllm_checked": VLLM_CHECKED}
    if step_log is not None and len(step_log):
        per = run_acceptance(step_log)["all"]
        n = max(len(step_log), 1)                      # every request-step is one draft (results.py's rule)
        vllm["spec_decode_per_position_acceptance_rates"] = [a / n for a in per["accepted_per_pos"]]
        deep.update({f"accept_rate@{i}": r for i, r in enumerate(per["accept_rate_at_pos"])})
        out["synthetic_acceptance_rates"] = per["survival"]
    return out
