"""The acceptance model's rate tables: pooled per-position conditional acceptance rates alpha_k per drafter and
domain (or dataset), as the paper reports them, and the JSON rate-table format (DESIGN.md; DSpark paper §4.3:
Table 1, Figs. 2-5).

The rate tables, each named by its source (``[acceptance] table``; see docs/acceptance.md):

* ``fig2`` (default): Fig. 2 rows (Qwen3-4B, gamma 7; DSpark paper Fig. 2) for math / code / chat; dspark and
  dflash continue to gamma 15 from Fig. 4 (positions 8-11 at one constant rate so that tau(11) equals the
  draft-length-12 value, 12-15 likewise for length 16); plus the nine Table 1 datasets (DSpark paper Table 1),
  each its domain's row scaled by one factor so that the implied tau at gamma 7 equals the Table 1 cell.
* ``fig4``: as ``fig2``, but runs with gamma <= 3 use the length-4 drafter: Fig. 2 rows 1..3 scaled by
  one factor so that tau(3) equals Fig. 4's length-4 value (a separately trained shorter block).
* ``dspark5``: the production-like DSpark-5 model: Fig. 2 DSpark rows 1..5, domains weighted by the paper's
  training mix (math 39.4, code 38.9, chat 17.6 + instruction-following 4.1 as chat; DSpark paper §3.3).
* ``mtp``: DeepSeek-V3 technical report, second-token acceptance 85-90% (midpoint 0.875), one position.
* a JSON file ``{"alpha": {domain: [a_1, ...]}}`` (a ``specsim fit`` model.json or ``specsim counters``
  output qualifies), or inline ``rates = {domain = [...]}`` in the scenario; ``constant_alpha`` for closed
  forms.

The latent model that turns a table into per-draft outcomes and confidences is :mod:`specsim.acceptance.model`.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

import numpy as np

from specsim.errors import SpecsimInputError


def brentq(*args, **kwargs) -> float:
    """scipy.optimize.brentq, imported on first use (scipy.optimize costs ~0.3 s to import; a run whose model
    comes from the on-disk cache, :mod:`specsim.acceptance.cache`, never needs it)."""
    from scipy.optimize import brentq as solve

    return solve(*args, **kwargs)

# Fig. 2 of the paper (Qwen3-4B, gamma 7): pooled per-position conditional acceptance, DSpark paper Fig. 2.
FIG2_ALPHA: dict[str, dict[str, tuple[float, ...]]] = {
    "dspark": {
        "math": (.905, .890, .888, .885, .887, .891, .882),
        "code": (.886, .872, .860, .861, .858, .859, .851),
        "chat": (.735, .738, .740, .744, .758, .766, .761),
    },
    "dflash": {
        "math": (.885, .827, .820, .834, .841, .839, .828),
        "code": (.865, .815, .797, .801, .810, .801, .777),
        "chat": (.718, .648, .638, .661, .682, .692, .688),
    },
    "eagle3": {
        "math": (.811, .823, .838, .844, .851, .856, .850),
        "code": (.771, .774, .781, .791, .787, .794, .784),
        "chat": (.534, .589, .642, .678, .709, .729, .733),
    },
}

# The DSpark paper's Fig. 4 (§4.3.2): domain-mean tau (own token included) at draft length gamma + 1 = 4, 8, 12, 16.
FIG4_TAU: dict[str, dict[str, tuple[float, float, float, float]]] = {
    "dspark": {"math": (3.54, 5.57, 6.62, 7.19), "code": (3.41, 5.12, 5.89, 6.25),
               "chat": (2.80, 3.49, 3.66, 3.70)},
    "dflash": {"math": (3.32, 4.80, 5.39, 5.54), "code": (3.23, 4.44, 4.85, 4.96),
               "chat": (2.61, 2.95, 3.02, 3.03)},
}
FIG4_GAMMAS = (3, 7, 11, 15)

# Table 1 of the DSpark paper, Qwen3-4B, gamma 7: tau per dataset, and the Fig. 2 domain of each dataset.
TABLE1_DATASETS = ("gsm8k", "math500", "aime25", "mbpp", "humaneval", "livecodebench", "mt-bench", "alpaca",
                   "arena-hard")
DATASET_DOMAIN = dict(zip(TABLE1_DATASETS, ("math",) * 3 + ("code",) * 3 + ("chat",) * 3))
TABLE1_TAU: dict[str, tuple[float, ...]] = {
    "eagle3": (5.14, 4.62, 3.92, 3.69, 4.16, 3.77, 2.39, 2.26, 2.55),
    "dflash": (5.40, 4.85, 4.15, 4.40, 4.74, 4.18, 3.07, 2.96, 2.83),
    "dspark": (6.11, 5.70, 4.89, 5.13, 5.38, 4.86, 3.64, 3.54, 3.29),
}

# DeepSeek-V3 technical report: acceptance of the MTP module's second token 85-90%; the midpoint.
MTP_ALPHA = 0.875
# The paper's drafter training mix (DSpark paper §3.3), instruction-following counted as chat.
PRODUCTION_DOMAIN_MIX = {"math": 0.394, "code": 0.389, "chat": 0.176 + 0.041}
DOMAIN_ALIASES = {"instruction-following": "chat"}
BUILTIN_TABLES = ("fig2", "fig4", "dspark5", "mtp")
_MAX_RATE = 0.995                 # cap of a scaled rate (a scaled table must stay strictly below 1)



def implied_tau(rates) -> float:
    """tau = 1 + sum_j prod_{i<=j} alpha_i for a full block (DSpark paper Fig. 2). (gamma,) -> float."""
    return float(1.0 + np.cumprod(np.asarray(rates, dtype=float)).sum())


def scale_to_tau(rates, tau: float, gamma: int | None = None) -> tuple[float, ...]:
    """Scale a rate row by one factor f (capped at 0.995) so that its implied tau at ``gamma`` equals ``tau``.

    Args:
        rates: (G,) conditional rates; the whole row is scaled, the solve uses its first ``gamma``.
        tau: target tokens per step, own token included.
        gamma: block length of the target tau (default: the whole row).

    Raises:
        ValueError: tau not reachable (outside (1, 1 + sum of 0.995^j)).
    """
    a = np.asarray(rates, dtype=float)
    g = a.size if gamma is None else gamma
    f = brentq(lambda s: implied_tau(np.minimum(s * a[:g], _MAX_RATE)) - tau, 1e-6, 1.0 / a.min(), xtol=1e-12)
    return tuple(float(x) for x in np.minimum(f * a, _MAX_RATE))


def _extend_fig4(rates: tuple[float, ...], taus: tuple[float, ...], gamma: int) -> tuple[float, ...]:
    """The row of the drafter trained for the smallest Fig. 4 length covering ``gamma`` > 7.

    gamma 8-11: the length-12 drafter, Fig. 2 rows 1-7 then positions 8-11 at one constant rate with
    tau(11) = taus[2]; gamma 12-15: the length-16 drafter, positions 8-15 at one constant rate with
    tau(15) = taus[3]. gamma <= 7 returns the Fig. 2 row unchanged.

    Raises:
        ValueError: gamma > 15 or a tau not reachable from the Fig. 2 prefix.
    """
    if gamma <= 7:
        return tuple(rates)
    if gamma > 15:
        raise ValueError("Fig. 4 covers draft lengths up to 16 (gamma 15)")
    target, num = (taus[2], 4) if gamma <= 11 else (taus[3], 8)
    base, surv = implied_tau(rates), float(np.prod(rates))
    need = target - base                                         # sum of the new positions' survivals
    if not 0 < need < surv * num:
        raise ValueError(f"Fig. 4 tau {target} not reachable from {base:.3f}")
    a = brentq(lambda x: surv * sum(x ** j for j in range(1, num + 1)) - need, 1e-9, 1 - 1e-12, xtol=1e-14)
    return tuple(rates) + (float(a),) * num


@lru_cache(maxsize=None)
def builtin_table(drafter: str, table: str = "fig2", gamma: int = 7) -> tuple[dict[str, tuple[float, ...]], str]:
    """:func:`built_table`, kept in memory and on disk (:mod:`specsim.acceptance.cache`: its rate rescaling
    solves with scipy.optimize, whose import alone costs ~0.3 s)."""
    from specsim.acceptance.cache import cached

    return cached(("builtin_table", drafter, table, gamma), lambda: built_table(drafter, table, gamma), tuple)


def built_table(drafter: str, table: str = "fig2", gamma: int = 7) -> tuple[dict[str, tuple[float, ...]], str]:
    """A built-in rate table of ``drafter`` and its provenance (see the module docstring).

    Args:
        drafter: dspark, dflash, eagle3 or mtp.
        table: fig2, fig4, dspark5 or mtp.
        gamma: block length of the run (``fig4`` picks the trained length from it).

    Returns:
        (domain -> rates, source string).

    Raises:
        SpecsimInputError: unknown drafter or table, or a table that does not exist for this drafter.
    """
    if table not in BUILTIN_TABLES:
        raise SpecsimInputError(None, None, "acceptance.table", f"one of {BUILTIN_TABLES} or a JSON file path",
                                repr(table))
    if drafter == "mtp" or table == "mtp":
        doms = ("math", "code", "chat", *TABLE1_DATASETS, *DOMAIN_ALIASES)
        return {d: (MTP_ALPHA,) for d in doms}, "DeepSeek-V3 report: MTP second-token acceptance 85-90% (0.875)"
    if drafter not in FIG2_ALPHA:
        raise SpecsimInputError(None, None, "drafter", f"one of {sorted(FIG2_ALPHA) + ['mtp']}", repr(drafter))
    if table == "dspark5":
        if drafter != "dspark":
            raise SpecsimInputError(None, None, "acceptance.table", "table 'dspark5' with drafter dspark",
                                    repr(drafter))
        rows = {d: r[:5] for d, r in FIG2_ALPHA["dspark"].items()}
        rows.update({a: rows[d] for a, d in DOMAIN_ALIASES.items()})
        return rows, "DSpark-5: DSpark paper Fig. 2 DSpark rows 1-5, training-mix domains (DSpark paper §3.3)"
    rows = dict(FIG2_ALPHA[drafter])
    source = "DSpark paper Fig. 2"
    if drafter in FIG4_TAU and gamma > 7:
        # beyond 15 the length-16 rows stay: the model then names the table and its length in the error
        rows = {d: _extend_fig4(r, FIG4_TAU[drafter][d], min(gamma, 15)) for d, r in rows.items()}
        source += f" + Fig. 4 draft length {12 if gamma <= 11 else 16}"
    for ds, tau in zip(TABLE1_DATASETS, TABLE1_TAU[drafter]):
        rows[ds] = scale_to_tau(rows[DATASET_DOMAIN[ds]], tau, gamma=7)
    source += " + Table 1 datasets"
    if drafter in FIG4_TAU and table == "fig4" and gamma <= 3:
        # the length-4 drafter: each domain's rows 1-3 scaled to Fig. 4's tau; its datasets by the same factor
        for d in ("math", "code", "chat"):
            f = scale_to_tau(rows[d][:3], FIG4_TAU[drafter][d][0])[0] / rows[d][0]
            for ds in [d] + [x for x in TABLE1_DATASETS if DATASET_DOMAIN[x] == d]:
                rows[ds] = tuple(min(f * a, _MAX_RATE) for a in rows[ds][:3])
        source = "DSpark paper Fig. 4 draft length 4: Fig. 2 rows 1-3 scaled to its tau + Table 1 datasets"
    rows.update({a: rows[d] for a, d in DOMAIN_ALIASES.items()})
    return rows, source


def load_rate_table(path: str | Path) -> dict[str, tuple[float, ...]]:
    """Read ``{"alpha": {domain: [a_1, ..., a_G]}}`` from a JSON file (other keys are ignored).

    Raises:
        SpecsimInputError: unreadable file, no ``alpha`` key (the file's keys named) or not a non-empty
            mapping there, or a row that is not a non-empty list of numbers strictly between 0 and 1.
    """
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as e:
        raise SpecsimInputError(str(path), None, "acceptance.table", "a readable JSON rate table",
                                f"{type(e).__name__}: {str(e)[:60]}") from None
    form = 'a JSON object {"alpha": {domain: [a_1, ..., a_G]}} (conditional rates per domain)'
    if not isinstance(data, dict):
        raise SpecsimInputError(str(path), None, "alpha", form, f"a JSON {_json_type(data)}")
    if "alpha" not in data:
        keys = ", ".join(repr(k) for k in list(data)[:6]) + (", ..." if len(data) > 6 else "")
        raise SpecsimInputError(str(path), None, "alpha", form, f"no key 'alpha' (keys: {keys or 'none'})")
    alpha = data["alpha"]
    if not isinstance(alpha, dict) or not alpha:
        raise SpecsimInputError(str(path), None, "alpha", "a mapping domain -> list of conditional rates",
                                "an empty object" if isinstance(alpha, dict) else f"a JSON {_json_type(alpha)}")
    return check_rates(alpha, str(path))


def _json_type(value) -> str:
    """The JSON name of a decoded value's type (object, array, string, number, true/false, null)."""
    if isinstance(value, bool):
        return "boolean"
    return {dict: "object", list: "array", str: "string", int: "number", float: "number"}.get(type(value), "null")


def check_rates(alpha: dict, src: str) -> dict[str, tuple[float, ...]]:
    """Validate ``domain -> rates`` (non-empty lists strictly inside (0, 1)); returns tuples.

    Raises:
        SpecsimInputError: naming the domain and the bad value.
    """
    out = {}
    for dom, rates in alpha.items():
        try:
            r = tuple(float(x) for x in rates)
        except (TypeError, ValueError):
            raise SpecsimInputError(src, None, f"alpha.{dom}", "a list of numbers", repr(rates)) from None
        if not r or not all(0.0 < x < 1.0 for x in r):
            raise SpecsimInputError(src, None, f"alpha.{dom}", "a non-empty list of rates strictly in (0, 1)",
                                    repr(rates))
        out[str(dom)] = r
    return out
