"""What the commands that read a sweep folder say about it on stderr, and the records they read: superseded
points left out, curves measured on different requests, failed points, the speculation overhead the points were
charged (issue 20), and a ``--num-requests`` above the trace's size; and, once per command, a scenario's seconds values
that read as milliseconds. Imports stay light (typer is not needed)."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

from specsim import fmt
from specsim.errors import SpecsimInputError


def _latest(d: Path) -> tuple[list[dict], int]:
    """(the valid records of sweep directory ``d`` less those an earlier version of the sweep left, how many were
    left out: :func:`specsim.analysis.sweep_records.superseded`)."""
    from specsim.analysis.sweep_records import load_records, superseded_ids

    recs = load_records(d, latest=False)
    old = superseded_ids(d, recs)
    return [r for r in recs if r["id"] not in old], len(old & {r["id"] for r in recs})


def warn_unreadable(d: Path) -> None:
    """Say on stderr which point records of sweep directory ``d`` cannot be read (and are left out)."""
    from specsim.analysis.sweep_records import unreadable_records

    bad = unreadable_records(d)
    if bad:
        names = ", ".join(str(p) for p in bad[:3]) + (f" (and {len(bad) - 3} more)" if len(bad) > 3 else "")
        print(f"warning: {len(bad)} point record{'s' if len(bad) > 1 else ''} cannot be read (cut off, not JSON or "
              f"failing its checksum) and {'are' if len(bad) > 1 else 'is'} left out: {names}; run the sweep again "
              "into this folder to recompute them", file=sys.stderr)


def folder_records(d: Path) -> list[dict]:
    """The valid records of sweep directory ``d`` (SpecsimInputError when it has no ``points/``), less those an
    earlier version of the sweep left (:func:`specsim.analysis.sweep_records.superseded`). Says on
    stderr what it leaves out, which points failed (their loads are missing from the frontiers) and the
    speculation overhead its points were charged where a run would say it (issue 20)."""
    from specsim.analysis.sweep_records import mixed_workloads

    if not (d / "points").is_dir():
        raise SpecsimInputError(str(d), None, None, "a sweep directory with points/ (specsim sweep --out)",
                                "no points/ folder" if d.is_dir() else "a file" if d.exists() else "no such folder")
    recs, old = _latest(d)
    warn_unreadable(d)
    if old:
        print(f"note: {old} points of an earlier version of this sweep (its trace, plug-in or profile, or its "
              "number of requests) are left out (the latest sweep recomputed them)", file=sys.stderr)
    mixed = mixed_workloads(recs)
    if mixed:
        print(f"warning: {mixed}; their throughputs are not comparable: sweep them again into one --out with the "
              "same trace and request counts", file=sys.stderr)
    print_speculation_notes(recs)
    failed = [r for r in recs if r["status"] != "ok"]
    if failed:
        shown = "; ".join(f"{r['config']['policy']} at {r['config']['load']['mode']} load "
                          f"{r['config']['load']['value']:g}, seed {r['config']['seed']}: "
                          f"{textwrap.shorten(str(r.get('error') or r.get('error_type')), 200)}"
                          for r in failed[:3])
        more = f" (and {len(failed) - 3} more)" if len(failed) > 3 else ""
        print(f"warning: {len(failed)} failed points are left out, so their curves' frontiers miss those loads: "
              f"{shown}{more}", file=sys.stderr)
    return recs


def warn_mixed_folder(out: Path) -> None:
    """On stderr, when the folder now holds curves measured on different requests at the same load (this sweep's
    trace or request counts differ from an earlier sweep's into the same ``--out``): compare would warn only
    later, and rank them anyway (a fresh user's report)."""
    from specsim.analysis.sweep_records import mixed_workloads

    mixed = mixed_workloads(_latest(out)[0])
    if mixed:
        print(fmt.wrapped(f"warning: {out} now holds points of different workloads: {mixed}; compare, recommend and "
                          "plot rank them together: sweep the other curves again with this sweep's trace and request "
                          "counts, or use a fresh --out"), file=sys.stderr)


def print_speculation_notes(recs: list[dict]) -> None:
    """On stderr, what a sweep's speculating points were charged for speculation's own overhead and the built-in
    acceptance rates they drafted on (:func:`sweep_notices`), wrapped to the terminal."""
    for note in sweep_notices(recs):
        print(fmt.wrapped(f"note: {note}"), file=sys.stderr)


def sweep_notices(recs: list[dict]) -> list[str]:
    """:func:`specsim.analysis.sweep_records.speculation_notes` of sweep records ``recs``, the built-in acceptance
    notices of several drafters merged into one (:func:`specsim.run_notices.merged_acceptance_notices`)."""
    from specsim.analysis.sweep_records import speculation_notes
    from specsim.run_notices import merged_acceptance_notices

    return merged_acceptance_notices(speculation_notes(recs)) + length_notes(recs)


def length_notes(recs: list[dict]) -> list[str]:
    """Per curve whose scenario gives ``acceptance.length`` (its own or the drafter's ``acceptance.drafters``
    entry), the length given beside the ones its points simulated (as the tables read them: a closed loop's
    window) and why they differ (:func:`specsim.run_notices.acceptance_length_text`); failed and non-drafting
    points are skipped."""
    from specsim.analysis.sweep_tables import curve_title, measured
    from specsim.run_notices import acceptance_length_text

    curves: dict[tuple, list[float]] = {}
    for r in recs:
        cfg = r.get("config") or {}
        kn = cfg.get("knobs") or {}
        if r.get("status") != "ok" or not kn.get("gamma"):
            continue
        acc = (cfg.get("scenario") or {}).get("acceptance") or {}
        own = (acc.get("drafters") or {}).get(kn.get("drafter")) or acc
        value = measured(r, "mean_acceptance_length")
        if own.get("length") is None or value is None:
            continue
        key = (cfg["policy"], int(kn["gamma"]), kn.get("drafter"), float(own["length"]),
               int(own.get("length_gamma") or kn["gamma"]),
               tuple(float(acc.get(k, 0.0)) for k in ("sigma_request", "sigma_step", "sigma_token")))
        curves.setdefault(key, []).append(float(value))
    return [acceptance_length_text(given, at, gamma, values, policy, sigmas,
                                   f" of {curve_title(policy, policy, gamma, drafter)}")
            for (policy, gamma, drafter, given, at, sigmas), values in curves.items()]


def note_more_requests_than_trace(num_requests: int | None, trace: Path, size: int) -> None:
    """A note on stderr when ``--num-requests`` asks for more requests than the trace holds (all of them run),
    as ``specsim run`` says it."""
    if num_requests is not None and num_requests > size:
        print(f"note: --num-requests {num_requests} but {trace} holds {size} requests: all of them run",
              file=sys.stderr)


def note_requests_per_user(requests_per_user: int | None, loads, trace: Path, size: int, refused=None,
                           window: str = "", num_requests: int | None = None, sessions: bool = False) -> None:
    """A note on stderr where ``--requests-per-user`` K asks more requests than a closed load C's points can run
    (K x C above the requests of the trace, or of its first ``--num-requests``, that the context window admits):
    they run fewer requests per user than asked, and where the point's requests are no more than twice the users
    they cannot form a closed-loop window and will fail (a fresh user's 512-line trace at 128 and 256 users: cut to
    4 per user without a word, then failures advising more requests per user). The window's refusals
    (:func:`context_refused`) are counted out and named: a run refuses them as unservable at once, so they are no
    user's requests (a trace with 40 of 100 beyond the window was noted as 3.3 per user at 30 users; 2.0 ran).

    Args:
        requests_per_user, loads, num_requests: the sweep's (or tune's) ``--requests-per-user``, closed loads and
            ``--num-requests``.
        trace, size: the trace's path and its number of requests.
        refused: (size,) bool, the requests the context window refuses (None: none); ``window``: that window in
            words (``"4,096 tokens, max_position_embeddings of ..."``).
        sessions: the trace holds conversations, a closed-loop user's unit of work: whether a window forms is
            :func:`conversations_text`'s to say, so the judgements by requests are left out.
    """
    import numpy as np

    from specsim.sweep.spec import point_requests

    if not requests_per_user:
        return
    bad = np.zeros(size, bool) if refused is None else np.asarray(refused, bool)
    admitted = np.r_[0, np.cumsum(~bad)]                 # admitted[n]: of the first n requests, those that can run
    n_of = {c: point_requests(num_requests, requests_per_user, "closed", c, size) for c in loads}
    cut = sorted(c for c in loads if requests_per_user * c > admitted[n_of[c]])
    short = sorted(c for c in loads if c not in cut and n_of[c] <= 2 * c and not sessions)   # N <= 2C with K <= 2
    if short:
        print(fmt.wrapped(f"note: at {', '.join(f'{c:g}' for c in short)} users the points run "
                          f"{', '.join(f'{n_of[c]:,}' for c in short)} requests, no more than twice the users, too "
                          "few for a closed-loop window: those points will fail (more --requests-per-user or "
                          "--num-requests, or fewer users)"), file=sys.stderr)
    if not cut:
        return
    fail = [c for c in cut if n_of[c] <= 2 * c and not sessions]      # the run's check counts every request
    runs = [c for c in cut if c not in fail]
    loads_said = f"at {len(cut)} load{'s' * (len(cut) > 1)}"
    text = f"note: {trace} holds {size:,} requests"
    if bad.any():
        text += (f", of which the context window ({window}) refuses {int(bad.sum()):,} as unservable (prompt + output "
                 f"beyond it), so fewer than --requests-per-user {requests_per_user} x the users can run {loads_said}")
    else:
        text += f", fewer than --requests-per-user {requests_per_user} x the users {loads_said}"
    if runs:
        counts = sorted({int(admitted[n_of[c]]) for c in runs})
        what = ("all of them" if not bad.any() else f"those {counts[0]:,}" if len(counts) == 1
                else ", ".join(f"{admitted[n_of[c]]:,}" for c in runs) + " of them")
        text += (f"; at {', '.join(f'{c:g}' for c in runs)} users the points run {what} "
                 f"({', '.join(f'{admitted[n_of[c]] / c:.1f}' for c in runs)} per user)")
    weak = [c for c in runs if admitted[n_of[c]] <= 2 * c and not sessions]   # refused: no user's requests
    if weak and bad.any():
        text += (f"; at {', '.join(f'{c:g}' for c in weak)} users that is no more than twice the users: the "
                 "closed-loop window may not form (the point then fails; a longer trace, or fewer users)")
    if fail:
        text += (f"; at {', '.join(f'{c:g}' for c in fail)} users that is no more than twice the users, too few "
                 "for a closed-loop window: those points will fail (a longer trace, or fewer users)")
    print(fmt.wrapped(text), file=sys.stderr)


#: Conversations per user below which a session trace's closed-loop window may not open: the window opens once
#: every user has completed its whole first conversation and closes when the last one starts, so conversations of
#: unequal length need more than the 2 x C that equal requests need. Measured 2026-12-07 (session_trace of
#: synthetic conversations, mtp1, default scenario; 1 to 8 turns, exp:2 think): at 16 users 2.5 and 3 x the users
#: failed after the whole run at both seeds, 3.5 x at one; at 32 users 4 x at one seed of two; 5 x never failed.
#: Conversations of 4 turns each formed a window from 2.5 x (40 requests measured of 164).
SESSION_WINDOW_USERS = 4


def closed_units(tr) -> tuple:
    """(the (N + 1,) units of work a closed-loop user takes among the first n requests of ``tr``, for every n,
    their name): conversations in a session trace (:func:`specsim.workload.extra.conversation_counts`, the run's
    rule), else requests (n itself)."""
    import numpy as np

    from specsim.workload.extra import conversation_counts

    convs = conversation_counts(tr)
    return (np.arange(len(tr) + 1), "requests") if convs is None else (convs, "conversations")


def check_closed_points(num_requests: int | None, requests_per_user: int | None, loads, open_loads, trace: Path,
                        tr) -> None:
    """Refuse, before anything is created or run, a sweep (or tune) whose every point is closed-loop and would fail:
    each point's requests (:func:`specsim.sweep.spec.point_requests`) hold no more than twice its users in
    requests, or in conversations for a session trace, which the run refuses (a fresh user's 40-conversation trace
    at 2 to 32 users with --requests-per-user 8 failed every point, said only afterwards).

    Raises:
        SpecsimInputError: naming ``--concurrency``, the units each load's points would hold, and what to change.
    """
    from specsim.sweep.spec import point_requests

    if open_loads or not loads:
        return
    units, what = closed_units(tr)
    held = {c: int(units[point_requests(num_requests, requests_per_user, "closed", c, len(tr))]) for c in loads}
    if any(m > 2 * c for c, m in held.items()):
        return
    whole = "" if what == "requests" else "; a closed-loop user runs a whole conversation before taking the next"
    raise SpecsimInputError("--concurrency", None, None, f"loads whose points hold more than twice their users in "
                            f"{what}, as a closed-loop window needs (the run refuses every point here{whole}; "
                            f"{trace} holds {int(units[-1]):,} {what}): more --requests-per-user or --num-requests, a "
                            "longer trace, or fewer users", f"{', '.join(f'{m:,}' for m in held.values())} {what} at "
                            f"{', '.join(f'{c:g}' for c in held)} users")


def conversations_text(tr, trace: Path, loads, num_requests: int | None = None, requests_per_user: int | None = None,
                       run: bool = False) -> str | None:
    """What a session trace's conversations mean for closed loads ``loads`` (None: not a session trace, or
    nothing to say). A closed-loop user runs a whole conversation before taking the next, so a point needs its
    requests to hold more than twice its users in conversations, not requests: where they do not, the point will
    fail (the run refuses it at once; left out with ``run``, for ``specsim run`` of ``tr``, which refuses it itself);
    below :data:`SESSION_WINDOW_USERS` x the users the window may not open (the point fails after its whole run)
    or measures few requests. Each load's conversations come from its points' first requests
    (:func:`specsim.sweep.spec.point_requests`); :func:`_conversation_advice` says what to change.
    A sweep of a 40-conversation, 160-request trace at 2 to 32 users, --requests-per-user 8: nothing was said,
    every point failed (32 requests at 4 users hold 8 conversations)."""
    from specsim.sweep.spec import point_requests
    from specsim.workload.extra import conversation_counts

    convs = conversation_counts(tr)
    if convs is None or not loads:
        return None
    n_of = {c: point_requests(num_requests, requests_per_user, "closed", c, len(tr)) for c in loads}
    s_of = {c: int(convs[n]) for c, n in n_of.items()}
    fail = [c for c in loads if s_of[c] <= 2 * c and not run]
    few = [c for c in loads if 2 * c < s_of[c] < SESSION_WINDOW_USERS * c]
    if not fail and not few:
        return None
    whose, what = ("run's", "run") if run else ("points'", "point")

    def held(cs) -> str:
        return (f"at {', '.join(f'{c:g}' for c in cs)} users the {whose} first {', '.join(f'{n_of[c]:,}' for c in cs)}"
                f" requests hold {', '.join(f'{s_of[c]:,}' for c in cs)} conversations")
    counts = "" if run else f" ({int(convs[-1]):,} conversations in {len(tr):,} requests)"
    text = (f"{trace} is a session trace{counts}, and a closed-loop user runs a whole conversation, think times "
            "included, before taking the next")
    if fail:
        text += f"; {held(fail)}, no more than twice the users: those points will fail (the run refuses them)"
    if few:
        text += (f"; {held(few)}, fewer than {SESSION_WINDOW_USERS} x the users: the window, open once every user "
                 "has completed its first conversation and closed when the last one starts, may not open (the "
                 f"{what} then fails after its whole run) or measure few requests")
    if run:                                   # tr is the run's first requests: the file may hold more
        return f"{text}: more --num-requests, a longer trace (more conversations), or fewer users"
    return f"{text}: {_conversation_advice(convs, fail + few, requests_per_user)}"


def _conversation_advice(convs, loads, requests_per_user: int | None) -> str:
    """What to change so that every closed load of ``loads`` runs more than :data:`SESSION_WINDOW_USERS` x its users
    in conversations (``convs``: :func:`specsim.workload.extra.conversation_counts` of the whole trace): the
    ``--requests-per-user`` (with it) or ``--num-requests`` that reaches them where the trace holds enough, else a
    longer trace; or fewer users."""
    import numpy as np

    margin, size = SESSION_WINDOW_USERS, convs.size - 1
    need = {c: int(np.searchsorted(convs, margin * c, side="right")) for c in loads}  # first n above margin x C
    reach = [c for c in loads if need[c] <= size]
    short = [c for c in loads if need[c] > size]
    fix = []
    if reach:
        flag = (f"--requests-per-user {max(-(-need[c] // c) for c in reach)}" if requests_per_user
                else f"--num-requests {max(need[c] for c in reach):,}")
        fix.append(f"{flag} (more than {margin} x the users in conversations at "
                   f"{', '.join(f'{c:g}' for c in reach)} users)")
    fix.append("a longer trace, of more conversations" + (f" (this one holds too few for {margin} x "
               f"{', '.join(f'{c:g}' for c in short)} users)" if short else ""))
    return f"{', '.join(fix)}, or fewer users"


def note_closed_loads(tr, trace: Path, loads, scenario, num_requests: int | None,
                      requests_per_user: int | None) -> None:
    """On stderr, before a sweep (or tune) at closed loads ``loads`` runs: :func:`note_requests_per_user` (its
    judgements of the closed-loop window left to the next for a session trace) and :func:`conversations_text`
    as a ``warning:``."""
    from specsim.workload.extra import conversation_counts

    note_requests_per_user(requests_per_user, loads, trace, len(tr),
                           *(context_refused(tr, scenario) if requests_per_user else ()), num_requests=num_requests,
                           sessions=conversation_counts(tr) is not None)
    text = conversations_text(tr, trace, loads, num_requests, requests_per_user)
    if text:
        print(fmt.wrapped(f"warning: {text}"), file=sys.stderr)


def context_refused(tr, scenario) -> tuple:
    """(the (N,) bool requests of trace ``tr`` a run of ``scenario`` refuses for the context window, that window in
    words) for :func:`note_requests_per_user` (:func:`specsim.run_config.context_refusals`, the run's rule).

    Raises:
        SpecsimInputError: the scenario's profile does not resolve.
    """
    from specsim.run_config import context_refusals

    refused, ctx = context_refusals(tr, scenario)
    return refused, (f"{ctx.max_model_len:,} tokens, {ctx.source}" if ctx.max_model_len else ctx.source)


def note_gammas(policies: tuple[str, ...], gammas: list[int]) -> None:
    """On stderr, what ``--gamma`` values do not change, as ``specsim run`` notes it per run: mtp1 fixes gamma 1,
    none never drafts, and at gamma 0 a speculative policy drafts nothing (its points are those of ``none``)."""
    if gammas and "mtp1" in policies and set(gammas) != {1}:
        print(fmt.wrapped("note: mtp1 fixes gamma 1 (its drafter's): the --gamma values do not apply to it"),
              file=sys.stderr)
    if gammas and "none" in policies and set(gammas) != {0}:
        print(fmt.wrapped("note: none never drafts: the --gamma values do not apply to it"), file=sys.stderr)
    spec_policies = [p for p in policies if p not in ("none", "mtp1")]
    if 0 in gammas and spec_policies:
        print(fmt.wrapped(f"note: at gamma 0 nothing is drafted, so {', '.join(spec_policies)} run as no speculation "
                          "there (the points of --policies none)"), file=sys.stderr)


def check_thresholds(policies: tuple[str, ...], takes: list[str], thresholds: list[float]) -> None:
    """Refuse ``--threshold`` values that no swept policy takes (as ``specsim run`` refuses the knob); note on
    stderr the policies they do not apply to.

    Raises:
        SpecsimInputError: ``--threshold`` given and no policy of ``--policies`` declares a ``threshold`` knob.
    """
    if not thresholds:
        return
    if not takes:
        raise SpecsimInputError("--threshold", None, None, "a policy in --policies that takes a threshold knob "
                                "(specdecpp, or a plug-in declaring it)", f"--policies {','.join(policies)}")
    others = [p for p in policies if p not in takes]
    if others:
        print(fmt.wrapped(f"note: --threshold applies to {', '.join(takes)} only, not to {', '.join(others)}"),
              file=sys.stderr)


def point_requests_text(num_requests: int | None, requests_per_user: int | None, closed, open_loads, trace: Path,
                        size: int, auto: str | None = None) -> str:
    """What each point of a sweep (or tune) runs, said before it starts: the rule and, per load, the number of the
    trace's first requests (:func:`specsim.sweep.spec.point_requests`, the rule that forms the points). A fresh
    user's ``--requests-per-user 8`` without ``--num-requests`` ran the whole 19,366-request trace at every point
    (15 minutes) with nothing said.

    Args:
        num_requests, requests_per_user: ``--num-requests`` and ``--requests-per-user`` (None when not given).
        closed, open_loads: the closed-loop user counts and open-loop rate scales.
        trace, size: the trace's path and its number of requests.
        auto: ``closed`` / ``open`` when that load axis is ``auto`` (its loads are not known yet).
    """
    from specsim.sweep.spec import point_requests

    k, n = requests_per_user, num_requests
    held = f"{trace} holds {size:,}"
    whole = point_requests(n, None, "open", 1.0, size)            # a point that K does not scale
    if n is None and not k:
        return (f"each point runs the whole trace, {size:,} requests ({trace}; --num-requests N or "
                "--requests-per-user K run fewer)")
    if (not k or auto == "open") and whole >= size:
        return f"each point runs the whole trace, {size:,} requests ({trace}; --num-requests {n:,} is more)"
    if not k or auto == "open":
        return f"each point runs the trace's first {whole:,} requests (--num-requests {n:,}; {held})"
    rule = f"max(--num-requests {n:,}, --requests-per-user {k} x its users)" if n is not None else \
        f"--requests-per-user {k} x its users"
    text = f"each closed-loop point runs the trace's first {rule} requests ({held})"
    if auto == "closed":
        return text + ", at each load the search picks"
    counts = {c: point_requests(n, k, "closed", c, size) for c in closed}
    text += ": " + (f"{counts[closed[0]]:,} at every load" if len(closed) > 1 and len(set(counts.values())) == 1
                    else ", ".join(f"{m:,} at {c:g} user{'s' * (c != 1)}" for c, m in counts.items()))
    if open_loads:
        text += f"; each open-loop point (rate scale) runs {whole:,}, --requests-per-user applies to closed loops only"
    return text


def note_point_requests(*args, **kwargs) -> None:
    """:func:`point_requests_text` on stderr as a ``note:``, wrapped to the terminal (the same arguments)."""
    print(fmt.wrapped(f"note: {point_requests_text(*args, **kwargs)}"), file=sys.stderr)


def note_whole_trace_folder(out: Path, requests_per_user: int | None, num_requests: int | None, tr) -> None:
    """On stderr, before a sweep with ``--requests-per-user`` K and no ``--num-requests`` runs into ``out``: where
    the folder's latest sweep had the same flags and its closed-loop points ran the whole trace at loads where K x
    the users is less (the rule until 2026-12-07), this sweep measures them again on K x the users requests (the
    old records stay, superseded), and ``--num-requests`` set to the trace's size resumes them instead (the same
    point ids: an id hashes the count of requests a point runs, not the flags that set it)."""
    from specsim.analysis.sweep_records import load_records, read_manifest

    if not requests_per_user or num_requests is not None or not (Path(out) / "points").is_dir():
        return
    old = read_manifest(out).get("spec") or {}
    if not old.get("requests_per_user") or old.get("num_requests") is not None:
        return
    size, sha, k_old = len(tr), tr.content_hash(), int(old["requests_per_user"])
    whole = [r for r in load_records(out) if r["config"]["load"]["mode"] == "closed"
             and r["config"].get("num_requests") == size and r["config"].get("trace_sha") == sha
             and k_old * float(r["config"]["load"]["value"]) < size]
    if whole:
        print(fmt.wrapped(f"note: {len(whole)} closed-loop point{'s' * (len(whole) > 1)} in {out} ran the whole "
                          f"trace ({size:,} requests): until 2026-12-07 --requests-per-user without --num-requests "
                          f"ran it at every load. This sweep runs --requests-per-user {requests_per_user} x the users "
                          f"and measures those points again (compare reads the new ones); --num-requests {size} "
                          "resumes the old ones instead"), file=sys.stderr)


def note_unit_warnings(scen, prof=None) -> None:
    """On stderr, once per command: the scenario's seconds values no engine has, a unit slip (milliseconds written
    as seconds: :func:`specsim.run_notices.unit_warnings`, against ``prof``, else the scenario's profile). A profile
    that does not resolve gives no warning here; the run names its error."""
    from specsim.hardware.profile import resolve_profile
    from specsim.run_notices import unit_warnings

    try:
        prof = prof or resolve_profile(scen.profile.name, scen.profile.lookup)
    except SpecsimInputError:
        prof = None
    for line in unit_warnings(scen, prof):
        print(fmt.wrapped(f"warning: {line}"), file=sys.stderr)
