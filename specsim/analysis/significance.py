"""Does a winner's margin hold over seeds? One paired rule for compare, tune, report and recommend.

Two curves (or two knob values) are run on the same seeds, and a seed fixes the workload and every
acceptance draw (common random numbers, DESIGN.md), so their throughputs at a tier are paired by seed.
The rule, :func:`paired_margin`:

* margin: mean(a) / mean(b) - 1 over the seeds where both are defined (the winner's relative lead);
* the margin holds when a one-sided paired t-test of a - b > 0 over those seeds gives p < ``ALPHA``
  (``scipy.stats.ttest_rel(a, b, alternative="greater")``; Student 1908, the paired form). With zero
  spread of the differences the test is undefined: the margin then holds when every difference is > 0;
* with one common seed there is no test: the verdict says "one seed" and ``holds`` is False;
* what the seeds vary is said wherever a verdict is quoted (:data:`SEEDS_SCOPE`, :func:`with_seeds_scope`): the
  acceptance draws on the same trace requests, not the traffic;
* with two seeds (fewer than :data:`MIN_SEEDS`) the test's p-value is shown but the margin is ``untested``, ``holds``
  False: a t-test on one degree of freedom rests on a spread estimated from two differences and on their
  normality, which two values cannot show (a fresh user read "holds (p=0.042, 2 seeds)" for a +1.2% lead
  as settled). Three seeds are the least that can uphold a lead.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

#: Significance level of the one-sided paired t-test.
ALPHA = 0.05

#: The fewest common seeds whose paired test can uphold a margin (module docstring).
MIN_SEEDS = 3

#: What a verdict's seeds vary, said wherever one is quoted (compare's footnote, recommend, the report's answer
#: line): every random draw of the run on the same trace requests in the same order, so a lead that holds over
#: seeds holds against the acceptance noise, not against another sample of the traffic (a fresh user measured a 9%
#: spread over three windows of one trace where the seeds spread by 0.1%).
SEEDS_SCOPE = "seeds redraw acceptance on the same trace requests, not the traffic"
#: How to test the lead against the traffic, said beside :data:`SEEDS_SCOPE` where there is room.
TRAFFIC_TEST = "other windows of the trace, or traces drawn with other seeds (specsim trace synth --seed), test that"


def with_seeds_scope(verdict: str, test: bool = True) -> str:
    """``verdict`` (:attr:`Margin.verdict`) followed by :data:`SEEDS_SCOPE` (and, with ``test``, :data:`TRAFFIC_TEST`)
    where it is a test over seeds (``holds``, ``within noise``, ``untested``); as it is otherwise (``one seed``,
    ``exact tie``, ``no runner-up``)."""
    if not verdict.startswith(("holds", "within noise", "untested")):
        return verdict
    return f"{verdict}; {SEEDS_SCOPE}" + (f": {TRAFFIC_TEST}" if test else "")


@dataclass(frozen=True)
class Margin:
    """A winner's lead over a runner-up, paired by seed (:func:`paired_margin`).

    Attributes:
        margin: mean(winner) / mean(runner-up) - 1 over the common seeds (NaN when undefined).
        mean_diff: mean of the per-seed differences, in the values' unit (tok/s/GPU for throughput).
        num_seeds: seeds where both values are defined.
        p_value: one-sided paired t-test p-value (NaN with fewer than two seeds).
        holds: the margin holds by the rule (False with fewer than :data:`MIN_SEEDS` seeds).
        seed_wins: seeds where the winner's value is larger.
    """

    margin: float
    mean_diff: float
    num_seeds: int
    p_value: float
    holds: bool
    seed_wins: int

    @property
    def verdict(self) -> str:
        """``holds (p=0.012, 3 seeds)``, ``within noise (p=0.31, 4 seeds)``, ``untested (p=0.042, 2 seeds; a test
        needs 3)``, ``one seed`` or ``no common seed``."""
        if self.num_seeds == 0:
            return "no common seed"
        if self.num_seeds == 1:
            return "one seed"
        p = f"p={self.p_value:.2g}" if math.isfinite(self.p_value) else "no spread"
        if self.num_seeds < MIN_SEEDS:
            return f"untested ({p}, {self.num_seeds} seeds; a test needs {MIN_SEEDS})"
        return f"{'holds' if self.holds else 'within noise'} ({p}, {self.num_seeds} seeds)"


def paired_margin(winner: dict[int, float] | np.ndarray, runner_up: dict[int, float] | np.ndarray) -> Margin:
    """The winner's margin over the runner-up and whether it holds over seeds (module docstring rule).

    Args:
        winner, runner_up: per-seed values, as ``{seed: value}`` dicts (paired by seed key) or as (s,)
            arrays over the same seeds in the same order. NaN values (a seed whose frontier does not reach
            the tier) drop that seed from the pair.

    Returns:
        A :class:`Margin`.

    Raises:
        ValueError: arrays of different lengths.
    """
    if isinstance(winner, dict) or isinstance(runner_up, dict):
        seeds = sorted(set(dict(winner)) & set(dict(runner_up)))
        a = np.array([winner[s] for s in seeds], float)
        b = np.array([runner_up[s] for s in seeds], float)
    else:
        a, b = np.asarray(winner, float), np.asarray(runner_up, float)
        if a.shape != b.shape:
            raise ValueError(f"paired values need equal lengths, got {a.shape} and {b.shape}")
    ok = np.isfinite(a) & np.isfinite(b)
    a, b = a[ok], b[ok]                                   # (n,) paired over the common seeds
    n = int(a.size)
    nan = float("nan")
    if n == 0:
        return Margin(nan, nan, 0, nan, False, 0)
    diff = a - b
    margin = float(a.mean() / b.mean() - 1) if b.mean() > 0 else nan
    wins = int((diff > 0).sum())
    if n == 1:
        return Margin(margin, float(diff[0]), 1, nan, False, wins)
    enough = n >= MIN_SEEDS
    if np.ptp(diff) == 0:                                 # no spread: the t statistic is undefined
        return Margin(margin, float(diff.mean()), n, nan, enough and bool(diff[0] > 0), wins)
    p = _greater_p_value(diff)
    return Margin(margin, float(diff.mean()), n, p, enough and bool(p < ALPHA), wins)


def _greater_p_value(diff: np.ndarray) -> float:
    """``scipy.stats.ttest_rel(a, b, alternative="greater").pvalue`` for ``diff = a - b`` ((n,), n >= 2, finite),
    computed as scipy 1.17 computes it (``ttest_1samp`` of the differences: their mean, their variance as the mean
    squared deviation times n / (n - 1), t = mean / sqrt(variance / n), and the Student t survival function
    ``scipy.special.stdtr(n - 1, -t)``), bit for bit (tests/test_tiers.py checks it against scipy.stats), without
    importing scipy.stats: ~1 s, the most of ``specsim compare``'s imports. scipy's warning where the differences
    are equal to within 10 ulp of their mean (the test is then unreliable) is not given."""
    from scipy.special import stdtr

    n = diff.size
    mean = np.mean(diff)
    variance = np.mean((diff - np.mean(diff, keepdims=True)) ** 2) * (np.float64(n) / np.float64(n - 1))
    t = mean / np.sqrt(variance / n)
    return float(stdtr(np.float64(n - 1), -t))
