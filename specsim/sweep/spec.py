"""The axes of a sweep and their expansion into points, each with a content-derived id.

* Load: closed-loop concurrency (N users) or open-loop rate scale; policy knobs (``gamma``,
  ``threshold``) are extra axes. A knob a policy ignores is dropped from its points (``mtp1`` forces
  gamma 1, ``none`` gamma 0, only policies that use ``threshold`` keep it), so no point is simulated
  twice under two names.
* Identity: a point's id is the SHA-256 (first 20 hex digits) of its fully resolved configuration:
  the resolved scenario dict, the step-time profile's content, the policy name (and a plug-in file's
  content), the resolved knobs (gamma, drafter, threshold), the load, the seed, the number of trace
  requests, the horizon, and the trace's content hash. The simulator's own code is not part of it:
  after changing the engine, sweep into a fresh directory (or pass ``--force``).
"""

from __future__ import annotations

import hashlib
import itertools
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from specsim.analysis.sweep_records import canonical_sha
from specsim.errors import SpecsimInputError
from specsim.scenario import Scenario
from specsim.sweep.store import RECORD_VERSION


@dataclass(frozen=True)
class SweepSpec:
    """The axes of a sweep.

    Args:
        policies: policy names (registry names or ``path/file.py:Name``).
        concurrency: closed-loop user counts (>= 1); may be combined with ``rate_scales``.
        rate_scales: open-loop rate scales (> 0): arrival times divided by each.
        seeds: run seeds; each (policy, knobs, load) point runs once per seed.
        gammas: draft block lengths to sweep; None = the scenario's ``engine.gamma``.
        thresholds: thresholds to sweep (policies that use one); None = the scenario's default.
        num_requests: the first N trace requests (None: all, or K x users with ``requests_per_user`` K).
        requests_per_user: closed loop only: a point at concurrency C uses the trace's first
            requests_per_user * C requests, or max(num_requests, requests_per_user * C) with num_requests, capped at
            len(trace) (:func:`point_requests`; None: num_requests for every load), so that a closed-loop window
            can open. It guarantees none: the window opens once every user
            has finished a request and closes when the last is issued, so a few long first requests can outlast
            the rest and the point fails (recorded; docs/sweeps.md gives the counts that work on prod.jsonl).
        max_sim_s: explicit horizon in simulated seconds (None: run to completion).
        drafter: override the scenario's drafter (``mtp1`` and ``none`` force their own).

    Raises:
        SpecsimInputError: an empty axis or a value out of range (naming the flag).
    """

    policies: tuple[str, ...]
    concurrency: tuple[int, ...] = ()
    rate_scales: tuple[float, ...] = ()
    seeds: tuple[int, ...] = (0,)
    gammas: tuple[int | None, ...] = (None,)
    thresholds: tuple[float | None, ...] = (None,)
    num_requests: int | None = None
    requests_per_user: int | None = None
    max_sim_s: float | None = None
    drafter: str | None = None

    def __post_init__(self) -> None:
        # a notebook's SweepSpec(policies="dspark,mtp1", concurrency=2, seeds=0): one value or "a,b" text is its
        # tuple (policies="mtp1" was iterated letter by letter, seeds=0 read as no seed)
        for name in ("policies", "concurrency", "rate_scales", "seeds", "gammas", "thresholds"):
            value = getattr(self, name)
            if isinstance(value, str):
                value = tuple(v.strip() for v in value.split(",") if v.strip()) if name == "policies" else (value,)
            elif value is None or isinstance(value, (int, float, np.integer, np.floating)):
                value = (value,) if name in ("gammas", "thresholds") or value is not None else ()
            object.__setattr__(self, name, tuple(value))
        named = [p for p in self.policies if not isinstance(p, str)]
        if named:       # points are records keyed by the policy's name: a function or object cannot be one
            raise SpecsimInputError("--policies", None, "policies", "policy names or path/file.py:Name specs (a sweep "
                                    "records each point by them; put a function or class in a plug-in file)",
                                    type(named[0]).__name__)
        bad = [(flag, v) for name, flag in (("concurrency", "concurrency"), ("seeds", "seeds"), ("gammas", "gamma"))
               for v in getattr(self, name)
               if v is not None and (isinstance(v, bool) or not isinstance(v, (int, np.integer)))]
        if bad:
            raise SpecsimInputError(f"--{bad[0][0]}", None, bad[0][0], "ints", repr(bad[0][1]))
        checks = [
            ("policies", "at least one policy", self.policies, bool(self.policies)),
            ("concurrency", "at least one load point (--concurrency or --rate-scales)", (),
             bool(self.concurrency or self.rate_scales)),
            ("concurrency", "ints >= 1", self.concurrency, all(c >= 1 for c in self.concurrency)),
            ("rate-scales", "finite values > 0", self.rate_scales,
             all(r > 0 and math.isfinite(r) for r in self.rate_scales)),
            ("seeds", "at least one seed", self.seeds, bool(self.seeds)),
            ("gamma", "ints >= 0", self.gammas, bool(self.gammas) and all(g is None or g >= 0 for g in self.gammas)),
            ("threshold", "values in [0, 1]", self.thresholds,
             bool(self.thresholds) and all(t is None or 0 <= t <= 1 for t in self.thresholds)),
            ("num-requests", "an int >= 1", self.num_requests, self.num_requests is None or self.num_requests >= 1),
            ("requests-per-user", "an int >= 1", self.requests_per_user,
             self.requests_per_user is None or self.requests_per_user >= 1),
            # without N a closed point runs K x C requests, and a window needs more than 2 x C: K <= 2 fails them all
            ("requests-per-user", "an int >= 3 without --num-requests (a closed-loop point then runs K x its users "
             "requests, and its measuring window needs more than twice the users), or a --num-requests above twice "
             "the users", self.requests_per_user,
             self.requests_per_user is None or self.num_requests is not None or not self.concurrency
             or self.requests_per_user >= 3),
        ]
        for flag, expected, got, ok in checks:
            if not ok:
                shown = ",".join("none" if g is None else f"{g:g}" if isinstance(g, float) else str(g) for g in got) \
                    if isinstance(got, (tuple, list)) else repr(got)     # as the flag was written, not a tuple's repr
                raise SpecsimInputError(f"--{flag}", None, flag, expected, shown or "none")


@dataclass(frozen=True)
class SweepPoint:
    """One simulation of a sweep: a fully resolved configuration and its id.

    Attributes:
        id: SHA-256 (20 hex digits) of ``config`` (module docstring).
        policy: policy name as given.
        knobs: resolved knobs: ``gamma`` and ``drafter`` always, ``threshold`` when the policy uses it.
        mode: ``closed`` or ``open``.
        load: concurrency (closed) or rate scale (open).
        seed: run seed.
        num_requests: trace requests simulated (the first N).
        max_sim_s: horizon in simulated seconds (None: run to completion).
        config: the canonical dict the id hashes.
    """

    id: str
    policy: str
    knobs: dict[str, Any]
    mode: str
    load: float
    seed: int
    num_requests: int
    max_sim_s: float | None
    config: dict[str, Any] = field(repr=False)

    def label(self) -> str:
        """A short human label: ``policy gamma=.. c=.. seed=..``."""
        load = f"c={int(self.load)}" if self.mode == "closed" else f"x{self.load:g}"
        kn = " ".join(f"{k}={v}" for k, v in self.knobs.items() if k != "drafter")
        return f"{self.policy} {kn} {load} seed={self.seed}".replace("  ", " ")


# --------------------------------------------------------------------------------------------- knobs
def policy_uses_threshold(policy: str, gamma: int | None) -> bool:
    """Whether ``policy`` declares a ``threshold`` knob (built-ins and plug-ins alike).

    Raises:
        SpecsimInputError: unknown policy.
    """
    from specsim.policies import policy_knobs

    return "threshold" in policy_knobs(policy)


def point_knobs(policy: str, scenario: Scenario, gamma: int | None, threshold: float | None,
                drafter: str | None, shared: tuple[str, ...] = ()) -> dict[str, Any]:
    """The knobs a sweep point records: resolved gamma and drafter, and threshold when the policy declares one.

    The values come from :func:`specsim.run_config.resolve_policy` (the same resolver a run uses): the sweep's
    ``threshold`` when given, else the scenario's ``[policy.knobs] threshold``, else the policy's default.

    Args:
        shared: knob names the sweep's other policies declare (a shared ``[policy.knobs]`` table).

    Returns:
        ``{"gamma": int, "drafter": str}`` plus ``"threshold": float`` when :func:`policy_uses_threshold`.

    Raises:
        SpecsimInputError: unknown policy, drafter or knob.
    """
    from specsim.run_config import resolve_policy

    given = {} if threshold is None or not policy_uses_threshold(policy, gamma) else {"threshold": float(threshold)}
    choice = resolve_policy(policy, scenario, gamma, drafter, given, shared)
    thr = choice.knobs.get("threshold")
    extra = {"threshold": float(thr)} if "threshold" in choice.knobs and thr is not None else {}
    return {"gamma": int(choice.gamma), "drafter": choice.drafter, **extra}


def sweep_inputs(scenario: Any, trace: Any) -> tuple[Scenario, Any]:
    """(scenario, trace) as :func:`specsim.simulation.simulate` takes them: a Scenario, a scenario TOML path or
    None (the default); a Trace or a JSONL trace path.

    Raises:
        SpecsimInputError: anything else, naming ``scenario`` or ``trace``; what loading a path raises.
    """
    from specsim.scenario import load_scenario
    from specsim.workload import load_trace

    if scenario is None or isinstance(scenario, (str, Path)):
        scenario = load_scenario(scenario)
    if isinstance(trace, (str, Path)):
        trace = load_trace(trace)
    if not isinstance(scenario, Scenario):
        raise SpecsimInputError(None, None, "scenario", "a Scenario (load_scenario(path)), a scenario TOML path or "
                                "None for the default", type(scenario).__name__)
    if not hasattr(trace, "arrival_s"):
        raise SpecsimInputError(None, None, "trace", "a Trace (specsim.workload.load_trace(path)) or a JSONL path",
                                type(trace).__name__)
    return scenario, trace


# --------------------------------------------------------------------------------------------- points
def _file_sha(path: str) -> str | None:
    p = Path(path)
    return hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else None


def _base_config(spec: SweepSpec, scenario: Scenario) -> dict[str, Any]:
    """The part of every point's config shared by the whole sweep."""
    from specsim.hardware.profile import resolve_profile

    prof = resolve_profile(scenario.profile.name, scenario.profile.lookup or None)
    return {"record_version": RECORD_VERSION, "scenario": scenario.to_dict(),
            "profile_sha": canonical_sha(prof.to_dict()), "max_sim_s": spec.max_sim_s}


def _trace_hasher(trace) -> Callable[[int], str]:
    """``n -> content hash of the trace's first n requests``, each computed once."""
    cache: dict[int, str] = {}

    def trace_hash(n: int) -> str:
        if n not in cache:
            cache[n] = trace.head(n).content_hash() if n < len(trace) else trace.content_hash()
        return cache[n]
    return trace_hash


def point_requests(num_requests: int | None, requests_per_user: int | None, mode: str, load: float,
                   n_all: int) -> int:
    """The trace requests a point simulates, the first ones of a trace of ``n_all``: the one rule of
    :class:`SweepSpec` (``sweep``, ``tune`` and their up-front notes).

    * ``requests_per_user`` K at a closed load of C users: K x C; with ``num_requests`` N too, max(N, K x C).
    * otherwise ``num_requests`` N, or the whole trace without it (open-loop points never scale with K).

    Always capped at ``n_all``. Until 2026-12-07 K without N ran the whole trace at every closed load (K was only
    a floor): a fresh user's 19,366-request trace ran whole at every point, 15 minutes for a 16-second grid. A
    point's id hashes this count, so a folder swept then resumes with ``--num-requests`` set to the trace's size.
    """
    n = min(n_all, num_requests or n_all)
    if mode == "closed" and requests_per_user:
        per_user = requests_per_user * int(load)
        n = min(n_all, per_user if num_requests is None else max(n, per_user))
    return n


def _num_requests(spec: SweepSpec, mode: str, load: float, n_all: int) -> int:
    """Trace requests a point simulates (:func:`point_requests` of SweepSpec's ``num_requests`` and
    ``requests_per_user``)."""
    return point_requests(spec.num_requests, spec.requests_per_user, mode, load, n_all)


def _shared_knobs(policies: tuple[str, ...]) -> tuple[str, ...]:
    """Every knob name some policy of the sweep declares (the sweep shares one ``[policy.knobs]`` table)."""
    from specsim.policies import policy_knobs

    return tuple(sorted({k for p in policies for k in policy_knobs(p)}))


def expand_points(spec: SweepSpec, scenario: Scenario, trace) -> list[SweepPoint]:
    """All distinct points of ``spec`` (module docstring), in a stable order.

    Order: policy, gamma, threshold, load (closed loads, then open), seed, as given in ``spec``.

    Args:
        spec: the sweep axes.
        scenario: the resolved scenario.
        trace: the full trace (:class:`specsim.workload.trace.Trace`); points use its first ``num_requests``.

    Raises:
        SpecsimInputError: unknown policy, drafter or profile.
    """
    from specsim.run_config import in_scenario_file

    with in_scenario_file(scenario):            # a profile name the scenario file set: its file and line, as run
        base = _base_config(spec, scenario)
    trace_hash = _trace_hasher(trace)
    loads = [("closed", float(c)) for c in spec.concurrency] + [("open", float(r)) for r in spec.rate_scales]
    points: dict[str, SweepPoint] = {}
    shared = _shared_knobs(spec.policies)
    for policy in spec.policies:
        plugin_sha = _file_sha(policy.rsplit(":", 1)[0]) if ":" in policy else None
        for g in spec.gammas:
            for h in spec.thresholds:
                knobs = point_knobs(policy, scenario, g, h, spec.drafter, shared)
                for (mode, load), seed in itertools.product(loads, spec.seeds):
                    n = _num_requests(spec, mode, load, len(trace))
                    cfg = dict(base, policy=policy, plugin_sha=plugin_sha, knobs=knobs,
                               load={"mode": mode, "value": load}, seed=int(seed), num_requests=n,
                               trace_sha=trace_hash(n))
                    pid = canonical_sha(cfg)[:20]
                    points.setdefault(pid, SweepPoint(pid, policy, knobs, mode, load, int(seed), n,
                                                      spec.max_sim_s, cfg))
    return list(points.values())
