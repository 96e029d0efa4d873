"""``specsim recommend``'s answer per tier (:class:`Recommendation`, filled in by
:func:`specsim.sweep.recommend.recommend`) and its text (:func:`recommendations_text`): one block per tier, every
line within the terminal's width, each configuration on its own lines ready to paste; the cautions of a point, or
the same caution, said in full once where several tiers (or engines) meet it, then "as at tier 50 ... (see there)"."""

from __future__ import annotations

import json
import textwrap
from dataclasses import asdict, dataclass, field
from typing import Any

from specsim import fmt
from specsim.analysis.frontier import BRACKET_GAP
from specsim.analysis.metrics import BUSY_SHARE, THRASHING_SHARE, prefill_bound, queued
from specsim.analysis.overload import OVERLOAD_MEANS, overload_reason
from specsim.analysis.significance import with_seeds_scope
from specsim.analysis.tier_notes import TierAttainment, attainment_caution
from specsim.analysis.tiers import too_close
from specsim.fmt import terminal_width
from specsim.sweep.engine_configs import EngineConfig


@dataclass
class Recommendation:
    """The answer at one SLA tier (:mod:`specsim.sweep.recommend`'s docstring).

    Attributes:
        tier: TPS/user, tok/s. curve: the winning curve. policy, knobs: its policy and knobs (gamma, drafter, ...).
        mode, load: the load point to run (closed: users; open: rate scale).
        tps_per_user, throughput_per_gpu: that point's seed means, tok/s and tok/s/GPU.
        tier_throughput_per_gpu: the winner's frontier throughput at the tier (tok/s/GPU).
        runner_up, margin, margin_verdict: the lead over the runner-up and whether it holds over seeds.
        engines: one :class:`EngineConfig` per engine (vllm, trtllm, sglang).
        recomputed_share: tokens that point recomputed after preemptions per output token (seeds pooled); above
            :data:`specsim.analysis.metrics.THRASHING_SHARE` the text warns that the KV cache, not the
            policy, limits the point.
        prefill_wait_ms, ttft_ms: that point's mean wait for a prefill instance and mean TTFT (ms, seed means;
            None where prefill is colocated); where the wait is most of the TTFT
            (:func:`specsim.analysis.metrics.prefill_bound`) the text warns that the prefill pool limits it.
        status, advice: the winner's frontier status at the tier (``covered``: every frontier point runs faster
            than the tier, so its heaviest load is the answer) and compare's load advice ("" when none).
        users_in_system: a closed-loop point's requests in the system on average (request throughput x mean
            E2EL, seed mean; :func:`specsim.analysis.metrics.users_in_system`); below
            :data:`specsim.analysis.metrics.BUSY_SHARE` of its users the text warns that it measures the users'
            think time between turns. None in open loop.
        waiting, p99_ttft_ms: that closed-loop point's requests queued for admission on average
            (``mean_waiting_requests``) and p99 TTFT (ms), seed means; where they are at least
            :data:`specsim.analysis.metrics.QUEUED_SHARE` of its users (:func:`specsim.analysis.metrics.queued`) the
            text warns that its users wait that long for their first token. None in open loop or older records.
        wait_in_tpot: that wait shows in TPOT and TPS/user, not TTFT (a disaggregated prefill stamping the first
            token, the summary's ``admission_wait_in_tpot``).
        limit: which limit kept its users waiting, with its cap (:func:`specsim.analysis.sweep_tables.admission_limit`).
        caution: the flagged frontier points the tier's throughput is read from (compare's ``caution``:
            :func:`specsim.analysis.sweep_tables.winner_cautions`), "" when none.
        attainment: the share of that point's measured requests whose own TPS/user meets the tier (seed mean;
            :func:`specsim.analysis.frontier.sla_table`): the tier is met by the mean TPS/user, so a point can
            meet it while a third of its users run slower (a fresh user's report). None without per-request
            records.
        measured_requests: the completions a closed-loop point's window measured (seed mean); below twice its
            users the text cautions that its figures rest on few requests. None in open loop.
        runner_up_queue: where the runner-up's own point at the tier queues its users for admission
            (:func:`specsim.analysis.metrics.queued`), the phrase saying so ("point at load 128 has 51.6 of its
            users queued ..."), else "": a tie with it is no tie for the users who wait.
        attained_load, attained_throughput_per_gpu, attained_share: the curve's load with the most throughput
            among those where at least :data:`specsim.analysis.tier_notes.ATTAINMENT_GOAL` of the requests meet
            the tier (its tok/s/GPU and attainment, seed means); None where no load does or the point itself does.
        tied_with: the curves whose throughput at the tier equals this one's (an exact tie,
            :func:`specsim.analysis.tiers.mark_winners`: ``margin_verdict`` ``exact tie``, the runner-up one of
            them); [] without a tie. ``curve`` is then the tied curve the most engines run (:func:`_tie_pick`).
        runner_up_caution: the flagged points the runner-up's figure at the tier, and so the margin, is read from
            (compare's ``runner_up_caution``: :func:`specsim.analysis.sweep_tables.reference_cautions`; in an exact
            tie the tied runner-up's own ``caution``, and there is no margin), "" when none.
        overload: (requests waiting, requests admitted) on average at an open-loop point that is overloaded
            (:func:`specsim.analysis.overload.overloaded`: its queue ran away), seed means; None elsewhere.
        overload_spans: (``duration_s``, ``arrival_span_s``) seed means there, for the overload's reason (None each
            where the records lack it).
        heavier: ``(load, tok/s/GPU, flags)`` of each load of this curve heavier than ``load`` that was simulated
            (seed-mean throughput; flags: :func:`specsim.analysis.sweep_tables.flagged_points`' kinds, [] where
            none), lightest first: a covered tier's text says what they delivered and, where one is flagged, that
            its figure measures that limit, not the policy. [] where none was simulated.
    """

    tier: float
    curve: str
    policy: str
    knobs: dict[str, Any]
    mode: str
    load: float
    tps_per_user: float
    throughput_per_gpu: float
    tier_throughput_per_gpu: float
    runner_up: str | None
    margin: float | None
    margin_verdict: str
    engines: list[EngineConfig] = field(default_factory=list)
    recomputed_share: float = 0.0
    prefill_wait_ms: float | None = None
    ttft_ms: float | None = None
    status: str = ""
    advice: str = ""
    users_in_system: float | None = None
    waiting: float | None = None
    p99_ttft_ms: float | None = None
    wait_in_tpot: bool = False
    limit: str = "the KV pool or max_num_seqs full"
    caution: str = ""
    runner_up_queue: str = ""
    measured_requests: float | None = None
    attainment: float | None = None
    attained_load: float | None = None
    attained_throughput_per_gpu: float | None = None
    attained_share: float | None = None
    tied_with: list[str] = field(default_factory=list)
    runner_up_caution: str = ""
    overload: tuple[float, float] | None = None
    overload_spans: tuple[float | None, float | None] = (None, None)
    heavier: list[tuple[float, float, list[str]]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)



def _attainment_of(r: Recommendation) -> TierAttainment | None:
    """``r``'s attainment fields as the :class:`specsim.analysis.tier_notes.TierAttainment` they came from."""
    return None if r.attainment is None else TierAttainment(r.curve, r.tier, r.mode, r.load, r.attainment,
                                                            r.attained_load, r.attained_share,
                                                            r.attained_throughput_per_gpu)


def recommendations_text(recs: list[Recommendation], width: int | None = None) -> str:
    """The recommendations as plain text, one block per tier, every line at most ``width`` columns.

    Text wraps at spaces only (a number or a name is never cut; only a single word wider than ``width`` could
    overflow). Each configuration sits on its own lines, ready to paste: a JSON configuration wraps only at the
    spaces between its tokens, so the lines copied together are the same JSON; SGLang flags wrap between
    flag-value pairs with a shell line continuation (`` \\``). A caution is said in full once: a later tier answered
    with the same point says its point cautions in one line ("caution: as at tier 50, this point rests on few
    requests and is prefill-bound (see there)"), a caution whose words are the same gives its facts and "see there",
    and an engine's best exact setting at a thrashing point already named says "that point thrashes (see vllm
    above)".

    Args:
        recs: from :func:`specsim.sweep.recommend.recommend`.
        width: columns to fit (None: :func:`specsim.fmt.terminal_width`, i.e. ``COLUMNS`` or the terminal's).
    """
    if not recs:
        return "no deployable policy meets any of the tiers"
    width = width or terminal_width()
    lines: list[str] = []
    said: dict = {}        # a point's cautions, a caution's text and an engine's thrashing point: where said in full

    def para(text: str, indent: str) -> None:
        cap = max(0, width - max(map(len, text.split())))     # a narrow terminal loses indentation first
        lines.extend(textwrap.wrap(text, width, initial_indent=indent[:cap],
                                   subsequent_indent=(indent + "  ")[:cap], break_long_words=False,
                                   break_on_hyphens=False))
    for r in recs:
        knobs = ", ".join(_knob(k, v, width) for k, v in r.knobs.items() if v is not None)
        margin = (f"{r.margin:+.1%} over {r.runner_up} ({with_seeds_scope(r.margin_verdict)})"
                  if r.margin is not None else r.margin_verdict)
        if r.tied_with:                 # an exact tie: every tied curve named, none crowned (tiers.mark_winners)
            others = ", ".join(r.tied_with[:-1]) + (" and " if len(r.tied_with) > 1 else "") + r.tied_with[-1]
            margin = f"an exact tie with {others}"
            para(f"tier {r.tier:g} tok/s/user: a tie: {r.curve} ({knobs}){',' if len(r.tied_with) > 1 else ' and'} "
                 f"{others} deliver the same throughput at "
                 f"the tier ({r.tier_throughput_per_gpu:,.0f} tok/s/GPU, equal within 1e-9), so none wins; the load "
                 f"and configurations below are {r.curve}'s, of the tied curves the one the most engines run (then "
                 "the first by name)", "")
        else:
            para(f"tier {r.tier:g} tok/s/user: {r.curve} ({knobs})", "")
        para(f"run at {r.mode} load {r.load:g}: {r.tps_per_user:.1f} TPS/user, {r.throughput_per_gpu:,.0f} "
             f"tok/s/GPU (frontier at the tier {r.tier_throughput_per_gpu:,.0f}); {margin}", "  ")
        if attainment_caution(_attainment_of(r)):
            para(f"caution: {attainment_caution(_attainment_of(r), 'this point')}", "  ")
        thrashes = r.recomputed_share > THRASHING_SHARE
        if r.status == "covered":
            if "failed" in r.advice:                # compare named a heavier load that never finished
                why, advice = "but a heavier load failed", f"; advice: {r.advice}"
            else:
                why, advice = _heavier_said(r), ""
                if r.advice and not thrashes:     # compare's "add heavier loads", or the limit its heaviest hit
                    advice = f"; advice: {r.advice}" + (" (its throughput still rises with load, so a heavier load "
                                                        "may meet the tier with more)"
                                                        if r.advice == "add heavier loads" else "")
            para("covered: every frontier point of this curve runs faster than the tier, so its heaviest load on "
                 f"the frontier is the answer ({why}){advice}", "  ")
        elif r.tier_throughput_per_gpu > (1 + BRACKET_GAP) * r.throughput_per_gpu:
            para(f"the frontier reaches the tier at {r.tier_throughput_per_gpu:,.0f} tok/s/GPU between this load "
                 f"and the next simulated one ({r.tier_throughput_per_gpu / r.throughput_per_gpu - 1:.0%} more, "
                 f"interpolated): sweep loads above {r.load:g} to find the point that runs it", "  ")
        elif r.advice:
            para(f"advice: {r.advice} (compare's rule: the sweep's loads do not bracket the tier well)", "  ")
        if r.runner_up and not r.tied_with and too_close(r.margin, r.margin_verdict):     # compare's and the report's
            inexact = any(e.config is None or not e.exact for e in r.engines)     # an engine runs it otherwise
            why = " or ".join(([f"your engine cannot run {r.curve} exactly"] if inexact else [])
                              + (["this point thrashes"] if thrashes else []))
            para("too close to call, a tie as far as this sweep can tell: "
                 f"{r.runner_up} delivers within {abs(r.margin):.1%} at this tier"
                 + (" (one seed: sweep --seeds 3 to judge it)" if r.margin_verdict == "one seed" else
                    " (two seeds: sweep --seeds 3 to judge it)" if r.margin_verdict.startswith("untested") else "")
                 + (f"; where {why}, the runner-up gives up nothing measurable" if why and not r.runner_up_queue
                    else "" if r.runner_up_queue else "; either serves")
                 + (f"; but not for its users: {r.runner_up}'s {r.runner_up_queue}"
                    + ("" if queued(r.waiting, r.load) else ", where this one's admits them at once")
                    if r.runner_up_queue else ""), "  ")
        elif r.runner_up and r.margin is not None and r.margin_verdict.startswith("within noise"):
            para(f"not settled: the {r.margin:+.1%} lead over {r.runner_up} is within the seeds' noise; more seeds "
                 "(sweep --seeds) would settle it", "  ")
        elif r.runner_up and r.margin is not None and r.margin_verdict.startswith("untested"):
            para(f"not settled: two seeds cannot test the {r.margin:+.1%} lead over {r.runner_up}; a third "
                 "(sweep --seeds 3) would", "  ")
        cautions = _point_cautions(r)
        point = (r.curve, r.mode, r.load, tuple(full for _, full in cautions))
        if cautions and point in said:            # the same point answered an earlier tier: its cautions said there
            para(f"caution: as at tier {said[point]}, this point "
                 f"{fmt.and_list(short for short, _ in cautions)} (see there)", "  ")
            cautions = []
        elif cautions:
            said[point] = f"{r.tier:g}"
        late = [c for c in cautions if c[0].startswith(("is overloaded", "is prefill-bound"))]
        for _, full in [c for c in cautions if c not in late]:
            para(f"caution: {full}", "  ")
        for text in _flag_cautions(r):        # a tier's own figures, but said alike where they are the same points
            if text in said:
                para(f"caution: as at tier {said[text]}, {_head(text)} (see there)", "  ")
            else:
                said[text] = f"{r.tier:g}"
                para(f"caution: {text}", "  ")
        for _, full in late:
            para(f"caution: {full}", "  ")
        for e in r.engines:
            para(f"{e.engine}: {e.note}", "  ")
            _config_lines(e.config, width, lines)
            alt, sim = e.alternative, e.simulated
            if sim is not None:
                better = alt is not None and alt["throughput_per_gpu"] > sim["throughput_per_gpu"]
                para(f"this setting as simulated in this sweep: {sim['curve']} at {sim['throughput_per_gpu']:,.0f} "
                     f"tok/s/GPU at the tier ({sim['throughput_per_gpu'] / r.tier_throughput_per_gpu - 1:+.0%} "
                     f"against {r.curve})" + ("; the exact setting below delivers more" if better else ""), "    ")
            if alt is not None:
                para(f"the best this engine runs exactly, as simulated: {alt['curve']} at "
                     f"{alt['throughput_per_gpu']:,.0f} tok/s/GPU at the tier, {alt['mode']} load {alt['load']:g} "
                     f"({alt['note']})", "    ")
                other = ("that", alt["curve"], alt["mode"], alt["load"])
                if alt["recomputed_share"] > THRASHING_SHARE and other in said:     # another engine's, or tier's
                    tier, engine = said[other]
                    where = f"{engine} above" if tier == r.tier else f"tier {tier:g}"
                    para(f"caution: that point thrashes (see {where})", "      ")
                elif alt["recomputed_share"] > THRASHING_SHARE:
                    said[other] = (r.tier, e.engine)
                    para(f"caution: that point thrashes (recomputes {alt['recomputed_share']:.0%} of its output "
                         "tokens after preemptions): more KV blocks or fewer users per replica", "      ")
                _config_lines(alt["config"], width, lines)
            para(f"keys checked against: {e.source}", "    ")
    para("how to use them: vLLM's JSON goes in `vllm serve MODEL --speculative-config '<JSON>'` (add your "
         "drafter checkpoint as \"model\" where the method loads one); TensorRT-LLM's keys go in the "
         "speculative_config of your extra_llm_api_options YAML; a closed load is the number of concurrent "
         "users (client requests in flight), not --max-num-seqs.", "")
    return "\n".join(lines)


def _point_cautions(r: Recommendation) -> list[tuple[str, str]]:
    """``(short, full)`` of each caution on the point ``r`` recommends, in the order the text gives them: it thrashes,
    rests on few requests, is think-bound, queues its users, is overloaded, is prefill-bound. Each depends on the
    point alone, so a later tier answered with the same point says them in one line (``short``: "as at tier 50,
    this point rests on few requests and is prefill-bound"; the fresh user's Azure sweep repeated both in full)."""
    out = []
    if r.recomputed_share > THRASHING_SHARE:
        out.append(("thrashes", f"this point thrashes (recomputes {r.recomputed_share:.0%} of its output tokens "
                    "after preemptions): the KV cache, not the policy, limits it; more KV blocks "
                    "(cluster.kv_capacity_tokens) or fewer users per replica may change the answer"))
    if r.measured_requests is not None and r.measured_requests < 2 * r.load:
        out.append(("rests on few requests", f"few requests measured at this point ({r.measured_requests:.0f} "
                    f"completions in its window for {r.load:g} users): its figures are noisy; more requests per user "
                    "widen the window"))
    if r.users_in_system is not None and r.users_in_system < BUSY_SHARE * r.load:
        out.append(("is think-bound", f"this point is think-bound ({r.users_in_system:.1f} of its {r.load:g} users "
                    "had a request in the system on average; the rest were between turns): it measures the users' "
                    "think time, not the server; a sweep with more users gives the server's answer"))
    if queued(r.waiting, r.load):
        shows = ("its TPOT and TPS/user hold that wait (the first token is stamped at the end of the "
                 "disaggregated prefill, before admission), its TTFT does not" if r.wait_in_tpot else
                 f"its TTFT holds that wait (p99 {r.p99_ttft_ms:,.0f} ms) while its TPS/user counts decode "
                 "speed only")
        out.append(("queues its users for admission", f"requests queue at this point ({r.waiting:.1f} of its "
                    f"{r.load:g} users waited on average to be admitted, {r.limit}): {shows}; "
                    "more users than it runs add waiting, not throughput"))
    if r.overload is not None:
        why = (f"{r.overload[0]:.1f} requests waited to be admitted on average against {r.overload[1]:.1f} admitted"
               if r.overload[0] >= r.overload[1] else overload_reason(*r.overload, *r.overload_spans))
        out.append(("is overloaded", f"this point is overloaded ({why}): {OVERLOAD_MEANS}"))
    if prefill_bound(r.prefill_wait_ms, r.ttft_ms):
        out.append(("is prefill-bound", f"this point is prefill-bound (its requests waited {r.prefill_wait_ms:,.0f} "
                    f"ms of their {r.ttft_ms:,.0f} ms TTFT for a prefill instance): its TPS/user and throughput "
                    "measure the prefill queue, not the policy; with more prefill instances (prefill.num_instances) "
                    "the answer at this tier may change"))
    return out


def _head(text: str) -> str:
    """``text`` up to its first ``": "`` outside parentheses: a caution's facts without the explanation after them."""
    depth = 0
    for i, ch in enumerate(text):
        depth += (ch == "(") - (ch == ")")
        if depth == 0 and text.startswith(": ", i):
            return text[:i]
    return text


def _heavier_said(r: Recommendation) -> str:
    """What a covered tier's heavier simulated loads delivered (``r.heavier``): less throughput than the answer's
    point, and where a load is flagged, that the flag is why: its figure measures that limit, not the policy (a
    heavier rate that is overloaded delivers less because its queue runs away, which says nothing of the policy)."""
    if not r.heavier:
        return "no heavier load was simulated"
    less = "less" if all(y < r.throughput_per_gpu for _, y, _ in r.heavier) else "no more"
    clean = [f"{load:g}" for load, _, kinds in r.heavier if not kinds]
    flagged = [(f"{load:g}", " and ".join(kinds)) for load, _, kinds in r.heavier if kinds]
    loads = "the heavier simulated load" + ("s" if len(clean or flagged) > 1 else "")
    said = f"{loads} {fmt.and_list(clean)} delivered {less} throughput" if clean else ""
    if flagged:
        said += (f"; so did {fmt.and_list(x for x, _ in flagged)}" if clean else
                 f"{loads} {fmt.and_list(x for x, _ in flagged)} delivered {less} throughput")
        why = (f"{'it is' if len(flagged) == 1 else 'they are'} {flagged[0][1]}" if len({k for _, k in flagged}) == 1
               else fmt.and_list(f"{x} is {k}" for x, k in flagged))
        measure = "its figure measures" if len(flagged) == 1 else "their figures measure"
        said += f" because {why}: a limit that {measure}, not the policy; see compare's warnings"
    return said


def _flag_cautions(r: Recommendation) -> list[str]:
    """The cautions of a recommendation whose tier figure, or the runner-up's figure its margin divides by, is read
    from flagged points (``r.caution``, ``r.runner_up_caution``), one sentence where both are (its own point's flags
    are said by the cautions on this point, so its own caution is left out where only this point is flagged). In an
    exact tie there is no margin: the runner-up is a tied curve, and the tie may not hold once the limit is lifted."""
    own = r.caution if r.caution and not all(part.startswith(f"load {r.load:g} ")
                                             for part in r.caution.split("; ")) else ""
    ru, theirs, tie = r.runner_up, r.runner_up_caution, bool(r.tied_with)
    fig = f"{r.tier_throughput_per_gpu:,.0f} tok/s/GPU" + ("" if tie else ", and the margin")
    role = "leader" if too_close(r.margin, r.margin_verdict) else "winner"      # no winner in a near tie
    after = ("so the tie may not hold once the limit is lifted" if tie else
             f"so the {role} may change once the limit is lifted")
    if own and theirs:                     # one sentence for both (compare's one note per tier)
        fig = f"{r.tier_throughput_per_gpu:,.0f} tok/s/GPU"
        whose = f"the tied curve {ru}'s equal figure" if tie else f"{ru}'s, which the margin divides by,"
        said = (f"the tier's figure ({fig}) and {whose} are read from their frontier points at {own}" if own == theirs
                else f"the tier's figure ({fig}) is read from the frontier point at {own}, and {whose} from its "
                f"frontier point at {theirs}")
        return [f"{said}: they measure the limit, not the policies, {after}"
                + ("" if tie else ", and the margin is no measure of what this policy adds") + " (compare's warnings)"]
    out = []
    if own:
        out.append(f"the tier's figure ({fig}) is read from the frontier point at {own}: it measures that limit, not "
                   f"the policy, {after} (compare's warnings)")
    if theirs and tie:
        out.append(f"the tied curve {ru}'s equal figure at the tier comes from its frontier point at {theirs}: that "
                   f"point measures the limit, not {ru}'s policy, {after} (compare's warnings)")
    elif theirs:
        out.append(f"the margin divides by {ru}'s figure at the tier, which comes from its frontier point at "
                   f"{theirs}: that point measures the limit, not {ru}'s policy, so the margin is no measure of what "
                   "this policy adds (compare's warnings)")
    return out


def _config_lines(config: Any, width: int, lines: list[str]) -> None:
    """Append a configuration ready to paste: SGLang flags with shell continuations, JSON whole across lines."""
    if isinstance(config, list) and config:
        lines.extend(_flag_lines(config, width, "    "))
    elif isinstance(config, dict):
        lines.extend(_fill(_json_words(json.dumps(config)), width, "    "))


def _knob(name: str, value: Any, width: int) -> str:
    """``name=value``, or ``name = value`` when ``name=`` and the value's first word would not fit one line."""
    text = f"{name}={value}"
    return text if len(text.split()[0]) <= width - 2 else f"{name} = {value}"


def _json_words(text: str) -> list[str]:
    """``text`` (compact JSON) split at the spaces between its tokens, never inside a string."""
    words, start, in_str, escaped = [], 0, False, False
    for i, ch in enumerate(text):
        if escaped:
            escaped = False
        elif in_str:
            in_str, escaped = ch != '"', ch == "\\"
        elif ch == '"':
            in_str = True
        elif ch == " ":
            words.append(text[start:i])
            start = i + 1
    return [*words, text[start:]]


def _fill(words: list[str], width: int, indent: str, tail: str = "") -> list[str]:
    """``words`` joined by spaces into lines of at most ``width`` columns (a word wider stays whole), each line
    after ``indent`` (shortened when the longest word would not fit after it) and each but the last ending in
    ``tail``."""
    lines: list[str] = []
    indent = indent[:max(0, width - max(len(w) + len(tail) for w in words))]
    for w in words:
        if lines and len(lines[-1]) + 1 + len(w) + len(tail) <= width:
            lines[-1] += " " + w
        else:
            lines.append(indent + w)
    return [line + tail for line in lines[:-1]] + lines[-1:]


def _flag_lines(flags: list[str], width: int, indent: str) -> list[str]:
    """Command-line flags, a flag and its value kept together, wrapped with shell continuations (`` \\``)."""
    pairs: list[str] = []
    for f in flags:
        if pairs and not f.startswith("-") and pairs[-1].startswith("-") and " " not in pairs[-1]:
            pairs[-1] += " " + f
        else:
            pairs.append(f)
    return _fill(pairs, width, indent, " \\")
