"""Scenarios: typed, validated configuration of the cluster, prefill, profile, drafter, acceptance, engine
and policy.

A scenario is a TOML file with the sections ``[cluster]``, ``[prefill]``, ``[profile]``, ``[drafter]``,
``[acceptance]``, ``[engine]`` and ``[policy]`` (whose policy knobs are the table ``[policy.knobs]``).
Every key is optional. **The defaults live in one place**, ``specsim/scenarios/default.toml``, with the
source of each number beside it; the dataclasses below carry the same values (``tests/test_scenario.py``
checks that they agree, field by field) and document what each key means, its unit and its range.
:func:`describe_scenario` lists every key with its type and default, generated from the dataclasses.

TOML has no null: a key whose default is ``None`` ("the family default", "from the profile", "off") is
left out of the file, or commented out as ``default.toml`` does. In Python, pass ``None``.

Loading: the bundled defaults, then ``--scenario FILE``, then each ``--set section.key=value`` (value in
TOML syntax; a bare word is a string). A dotted key reaches into a table: ``--set policy.knobs.threshold=0.5``
and ``--set acceptance.rates.legal=[0.8,0.7]`` add one entry to the table (tables merge; other keys replace).

Every section validates itself in ``__post_init__``, so a config built in Python is checked exactly like
one loaded from TOML; the error (:class:`SpecsimInputError`) names the field (``cluster.num_replicas``), the
allowed range and the value, plus the file or ``--set`` item when it came from one. Building a scenario has
no side effects; a run saves the resolved scenario (and its hash) beside its results.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import math
import re
import tomllib
import types
import typing
from dataclasses import asdict, dataclass, field, fields, replace
from functools import cache
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from specsim.errors import SpecsimInputError, did_you_mean

DEFAULT_SCENARIO = Path(__file__).resolve().parent / "scenarios" / "default.toml"

#: KV capacity per replica, tokens, when neither ``kv_capacity_tokens`` nor ``gpu_memory_utilization`` is set
#: (default.toml gives its derivation: Llama-2-7B fp16 on one 80 GB H100 at 90% memory utilisation).
DEFAULT_KV_CAPACITY_TOKENS = 110000

#: The latent acceptance model's nine parameters, in order, with their tuned defaults (PAPER.md sections 4 and
#: 8.4; values and measurements in docs/acceptance.md). The one home of these names and numbers: the scenario's
#: ``[acceptance]`` section, :class:`specsim.acceptance.model.AcceptanceModel` and ``specsim fit`` read them here
#: (default.toml repeats the values for readers; tests/test_scenario.py checks they agree).
LATENT_DEFAULTS: dict[str, float] = {
    "sigma_request": 1.03,
    "sigma_step": 0.89,
    "sigma_token": 1.16,
    "sigma_conf": 0.54,
    "conf_scale": 1.07,
    "conf_shift": 0.34,
    "conf_scale_later": 1.12,
    "conf_shift_later": 0.19,
    "conf_low_ratio": 0.53,
}

ROUTERS = ("round-robin", "least-outstanding", "prefix-aware")
KV_ALLOCATIONS = ("paged", "reserve")
PREFILL_MODES = ("disaggregated", "colocated")
#: Where a disaggregated request's first token is emitted (docs/memory.md, "TTFT under disaggregation").
FIRST_TOKEN_RULES = ("prefill", "decode-step")
PROFILE_LOOKUPS = ("linear", "padded")
DRAFTERS = ("dspark", "dflash", "eagle3", "mtp", "none")
CALIBRATIONS = ("sts", "none")


class _Section:
    """Shared ``__post_init__``: coerce every field to its declared type, then check the section's ranges."""

    SECTION: ClassVar[str] = ""

    def __post_init__(self) -> None:
        for f in fields(self):  # type: ignore[arg-type]
            object.__setattr__(self, f.name, _coerce(_hints(type(self))[f.name], getattr(self, f.name),
                                                     f"{self.SECTION}.{f.name}"))
        self._validate()

    def _validate(self) -> None:
        """Raise :class:`SpecsimInputError` naming the first field outside its range."""

    def _check(self, cond: bool, key: str, expected: str) -> None:
        if not cond:
            raise SpecsimInputError(None, None, f"{self.SECTION}.{key}", expected, repr(getattr(self, key)))

    def _check_choice(self, key: str, choices: tuple[str, ...]) -> None:
        self._check(getattr(self, key) in choices, key, "one of " + ", ".join(repr(c) for c in choices))


@dataclass(frozen=True)
class ClusterConfig(_Section):
    """Decode side of the cluster and its KV-cache memory.

    Attributes:
        num_replicas: decode serving instances behind the router, int >= 1.
        gpus_per_replica: GPUs per decode instance (throughput per GPU divides by these), int >= 1.
        router: one of :data:`ROUTERS`; ``prefix-aware`` sends a request to the replica holding its longest
            cached prefix, ties broken by load.
        max_num_seqs: running requests per replica, int >= 1.
        kv_capacity_tokens: KV-cache capacity per replica in tokens, int >= ``block_size``; None =
            :data:`DEFAULT_KV_CAPACITY_TOKENS`, or derived from ``gpu_memory_utilization`` when that is set.
        gpu_memory_utilization: derive the KV capacity as vLLM does from this fraction of each GPU's memory,
            float in (0, 1] (:func:`specsim.hardware.kv_capacity.kv_capacity`); None = off. Setting it together with
            ``kv_capacity_tokens`` is an error.
        kv_allocation: ``paged`` (blocks on demand, preemption by recompute when they run out, as vLLM V1)
            or ``reserve`` (the blocks of prompt + max output tokens reserved at admission, never preempts; a
            verify step never needs more: docs/memory.md).
        block_size: tokens per KV block, int >= 1.
        prefix_caching: share full KV blocks of identical prefixes between requests (vLLM's automatic
            prefix caching).
    """

    SECTION: ClassVar[str] = "cluster"
    num_replicas: int = 1
    gpus_per_replica: int = 1
    router: str = "round-robin"
    max_num_seqs: int = 256
    kv_capacity_tokens: int | None = None
    gpu_memory_utilization: float | None = None
    kv_allocation: str = "paged"
    block_size: int = 16
    prefix_caching: bool = True

    def _validate(self) -> None:
        self._check(self.num_replicas >= 1, "num_replicas", "an int >= 1")
        self._check(self.gpus_per_replica >= 1, "gpus_per_replica", "an int >= 1")
        self._check_choice("router", ROUTERS)
        self._check(self.max_num_seqs >= 1, "max_num_seqs", "an int >= 1")
        self._check_choice("kv_allocation", KV_ALLOCATIONS)
        self._check(self.block_size >= 1, "block_size", "an int >= 1 (tokens per KV block)")
        self._check(self.kv_capacity_tokens is None or self.kv_capacity_tokens >= self.block_size,
                    "kv_capacity_tokens", f"an int >= cluster.block_size ({self.block_size})")
        self._check(self.gpu_memory_utilization is None or 0 < self.gpu_memory_utilization <= 1,
                    "gpu_memory_utilization", "a fraction in (0, 1] (leave it out to set kv_capacity_tokens)")
        self._check(self.gpu_memory_utilization is None or self.kv_capacity_tokens is None,
                    "gpu_memory_utilization", "no value while cluster.kv_capacity_tokens is set (set one of the two: "
                    "the capacity is derived from the GPU memory share)")


@dataclass(frozen=True)
class PrefillConfig(_Section):
    """Prefill: a disaggregated pool or colocated chunked prefill.

    Attributes:
        mode: ``disaggregated`` (a separate pool, one request at a time per instance) or ``colocated``
            (chunked prefill mixed into decode steps).
        num_instances: disaggregated prefill pool size, int >= 1.
        gpus_per_instance: GPUs per prefill instance, int >= 1.
        time_per_token_s: fixed prefill seconds per prompt token, float > 0; None = from the profile.
        chunk_tokens: colocated: token budget per mixed step; disaggregated: the chunk of the profile lookup;
            int >= 1.
        first_token: disaggregated: ``prefill`` (the first token at the end of prefill, the earlier rule and
            the default) or ``decode-step`` (with the decode replica's first step that includes the request,
            which recomputes the last prompt token: vLLM V1's KV-connector path; docs/memory.md).
    """

    SECTION: ClassVar[str] = "prefill"
    mode: str = "disaggregated"
    num_instances: int = 1
    gpus_per_instance: int = 1
    time_per_token_s: float | None = None
    chunk_tokens: int = 512
    first_token: str = "prefill"

    def _validate(self) -> None:
        self._check_choice("mode", PREFILL_MODES)
        self._check_choice("first_token", FIRST_TOKEN_RULES)
        self._check(self.num_instances >= 1, "num_instances", "an int >= 1")
        self._check(self.gpus_per_instance >= 1, "gpus_per_instance", "an int >= 1")
        self._check(self.time_per_token_s is None or self.time_per_token_s > 0, "time_per_token_s",
                    "a float > 0 s per prompt token (leave it out to take prefill time from the profile)")
        self._check(self.chunk_tokens >= 1, "chunk_tokens", "an int >= 1")


@dataclass(frozen=True)
class ProfileConfig(_Section):
    """Which step-time profile the replicas use.

    Attributes:
        name: a bundled profile name or a path to a profile JSON (resolved when the run starts).
        lookup: ``linear`` or ``padded``; None = the profile file's own rule.
    """

    SECTION: ClassVar[str] = "profile"
    name: str = "h100-llama2-7b-tp1"
    lookup: str | None = None

    def _validate(self) -> None:
        self._check(self.name != "", "name", "a bundled profile name or a profile JSON path")
        self._check(self.lookup is None or self.lookup in PROFILE_LOOKUPS, "lookup",
                    "'linear' or 'padded' (leave it out for the profile file's rule)")


@dataclass(frozen=True)
class DrafterConfig(_Section):
    """The drafter used by speculative policies (``mtp1`` and ``none`` override it).

    Cost fractions are of the target's step time at batch R (:class:`specsim.hardware.drafter.DrafterCost`).

    Attributes:
        name: one of :data:`DRAFTERS`.
        base_fraction: drafting cost independent of gamma, float in [0, 10); None = the family default.
        per_draft_fraction: drafting cost per drafted position, float in [0, 10); None = the family default.
        kv_fraction: the drafter's own KV-cache tokens per target KV token, float >= 0; None = the family
            default.
        layers: draft layers of the target's layer config for the drafter's cost from its shape (profiles
            built by the step model), int >= 1; None = the drafter's default (dspark/dflash 5, eagle3 1,
            mtp 1; specsim.hardware.drafter.DRAFTER_LAYERS). Setting ``base_fraction`` or
            ``per_draft_fraction`` replaces the shape with the fraction model (0 allowed).
        block: the checkpoint's draft block, the largest gamma it drafts, int >= 1; None = the drafter's
            default (dspark and dflash 7, the paper's checkpoints; eagle3 and mtp no limit;
            specsim.hardware.drafter.DRAFTER_BLOCK). A run with gamma above it is refused; set 12 or 16 for
            Fig. 4's longer-block drafters (PAPER.md 8.3).
    """

    SECTION: ClassVar[str] = "drafter"
    name: str = "dspark"
    base_fraction: float | None = None
    per_draft_fraction: float | None = None
    kv_fraction: float | None = None
    layers: int | None = None
    block: int | None = None

    def _validate(self) -> None:
        self._check_choice("name", DRAFTERS)
        self._check(self.block is None or (isinstance(self.block, int) and 1 <= self.block <= 64), "block",
                    "an int in [1, 64], the checkpoint's draft block (leave it out for the drafter's default)")
        self._check(self.layers is None or (isinstance(self.layers, int) and self.layers >= 1), "layers",
                    "an int >= 1, draft layers (leave it out for the drafter's default)")
        for key in ("base_fraction", "per_draft_fraction"):
            v = getattr(self, key)
            self._check(v is None or 0 <= v < 10, key,
                        "a fraction of the target step in [0, 10) (leave it out for the family default)")
        self._check(self.kv_fraction is None or self.kv_fraction >= 0, "kv_fraction",
                    "a float >= 0, drafter KV tokens per target KV token (leave it out for the family "
                    "default)")


@dataclass(frozen=True)
class AcceptanceConfig(_Section):
    """Acceptance model: rate table, latent difficulty, confidence distortion, calibration
    (specsim.acceptance.model).

    The latent and confidence parameters are tuned to PAPER.md sections 4 and 8.4 (values and measurements
    in docs/acceptance.md).

    Attributes:
        sigma_request: latent logit spread between requests, float >= 0.
        sigma_step: between steps (anchors) of a request, shared by a block's positions, float >= 0.
        sigma_token: between positions of a block, float >= 0.
        sigma_conf: confidence noise (logit scale): how imperfectly the head sees the latent, float >= 0.
        conf_scale: position 1: ``logit(c_raw) = conf_scale * (latent + noise) + conf_shift``, float > 0.
        conf_shift: see ``conf_scale``.
        conf_scale_later: the same distortion at positions >= 2, float > 0.
        conf_shift_later: see ``conf_scale_later``.
        conf_low_ratio: slope multiplier where latent + noise < 0 (compresses the head's low end), float > 0.
        constant_alpha: this conditional rate at every position and domain (closed forms), float in (0, 1);
            None = off.
        table: a built-in rate table (fig2, fig4, dspark5, mtp) or a JSON rate table ``{"alpha": {...}}``;
            None = fig2 (mtp for the MTP drafter).
        rates: inline ``{domain = [a_1, ...]}`` rows, rates strictly in (0, 1), added over the table's rows.
        model: ``fitted:DIR`` or ``empirical:DIR`` from ``specsim fit``; None = the latent model.
        temperatures: a ``specsim calibrate`` temperatures.json; None = STS fitted when the model is built.
        calibration: ``sts`` or ``none`` (policies then see raw confidences).
    """

    SECTION: ClassVar[str] = "acceptance"
    sigma_request: float = LATENT_DEFAULTS["sigma_request"]
    sigma_step: float = LATENT_DEFAULTS["sigma_step"]
    sigma_token: float = LATENT_DEFAULTS["sigma_token"]
    sigma_conf: float = LATENT_DEFAULTS["sigma_conf"]
    conf_scale: float = LATENT_DEFAULTS["conf_scale"]
    conf_shift: float = LATENT_DEFAULTS["conf_shift"]
    conf_scale_later: float = LATENT_DEFAULTS["conf_scale_later"]
    conf_shift_later: float = LATENT_DEFAULTS["conf_shift_later"]
    conf_low_ratio: float = LATENT_DEFAULTS["conf_low_ratio"]
    constant_alpha: float | None = None
    table: str | None = None
    rates: dict[str, list[float]] = field(default_factory=dict)
    model: str | None = None
    temperatures: str | None = None
    calibration: str = "sts"

    def _validate(self) -> None:
        for key in ("sigma_request", "sigma_step", "sigma_token", "sigma_conf"):
            self._check(getattr(self, key) >= 0, key, "a float >= 0")
        for key in ("conf_scale", "conf_scale_later", "conf_low_ratio"):
            self._check(getattr(self, key) > 0, key, "a float > 0")
        self._check(self.constant_alpha is None or 0 < self.constant_alpha < 1, "constant_alpha",
                    "a float in (0, 1) (leave it out for the rate table)")
        self._check(self.table is None or self.table != "", "table",
                    "fig2, fig4, dspark5, mtp or a JSON rate-table path (leave it out for the default table)")
        self._check(all(isinstance(r, list) and r and all(
            isinstance(x, (int, float)) and not isinstance(x, bool) and 0 < x < 1 for x in r)
            for r in self.rates.values()), "rates", "a table {domain = [rates strictly in (0, 1)]}")
        self._check(self.model is None or (self.model.split(":", 1)[0] in ("fitted", "empirical")
                                           and self.model.split(":", 1)[-1] not in ("", self.model)), "model",
                    "'fitted:DIR' or 'empirical:DIR' (leave it out for the latent model)")
        self._check(self.temperatures is None or self.temperatures != "", "temperatures",
                    "a temperatures.json path (leave it out to fit STS at build time)")
        self._check_choice("calibration", CALIBRATIONS)


@dataclass(frozen=True)
class EngineConfig(_Section):
    """Per-step and per-request engine costs.

    Attributes:
        gamma: draft block length, int in [0, 64].
        host_overhead_s: CPU scheduling seconds per step, hidden by ZOS only for policies that fix their
            batch early; float >= 0.
        request_overhead_s: fixed seconds per request before it reaches the scheduler (API server,
            tokenisation); counted in TTFT; float >= 0.
        emission_overhead_s: seconds per emitting request per step on the step's critical path (output
            processing, detokenisation); float >= 0.
        max_model_len: the context window in tokens (prompt + output), int >= 1, as vLLM's ``--max-model-len``;
            None = the model's own (specsim.hardware.context: profile metadata, step model, config.json).
        context_overflow: a request beyond the window is ``unservable`` (with its reason, as vLLM refuses
            it) or ``truncate`` (its output cut to fit, as replay tools do).
    """

    SECTION: ClassVar[str] = "engine"
    gamma: int = 7
    host_overhead_s: float = 0.0005
    request_overhead_s: float = 0.005
    emission_overhead_s: float = 0.0
    max_model_len: int | None = None
    context_overflow: str = "unservable"

    def _validate(self) -> None:
        self._check(0 <= self.gamma <= 64, "gamma", "an int in [0, 64]")
        self._check(self.max_model_len is None or self.max_model_len >= 1, "max_model_len",
                    "an int >= 1, tokens of context (leave it out for the model's own)")
        self._check_choice("context_overflow", ("unservable", "truncate"))
        for key in ("host_overhead_s", "request_overhead_s", "emission_overhead_s"):
            self._check(getattr(self, key) >= 0, key, "a float >= 0 s")


@dataclass(frozen=True)
class PolicyConfig(_Section):
    """Policy knobs: ``[policy.knobs]`` name = value, passed to the policy when it is made.

    Which knobs exist, their defaults and ranges belong to each policy (an unknown knob is an error raised
    when the policy is made). Here only the shape is checked.

    Attributes:
        knobs: ``{name: value}``; a name is an identifier, a value a bool, int, float, string or a list
            of them.
    """

    SECTION: ClassVar[str] = "policy"
    knobs: dict[str, Any] = field(default_factory=dict)

    def _validate(self) -> None:
        for name, value in self.knobs.items():
            if not (isinstance(name, str) and name.isidentifier()):
                raise SpecsimInputError(None, None, "policy.knobs", "knob names that are identifiers",
                                        repr(name))
            if not _is_knob_value(value):
                raise SpecsimInputError(None, None, f"policy.knobs.{name}",
                                        "a bool, int, finite float, string or a list of them", repr(value))


def _is_knob_value(value: Any, nested: bool = False) -> bool:
    if isinstance(value, list) and not nested:
        return all(_is_knob_value(v, nested=True) for v in value)
    if isinstance(value, float):
        return math.isfinite(value)
    return isinstance(value, (bool, int, str))


SECTIONS: dict[str, type] = {
    "cluster": ClusterConfig, "prefill": PrefillConfig, "profile": ProfileConfig,
    "drafter": DrafterConfig, "acceptance": AcceptanceConfig, "engine": EngineConfig,
    "policy": PolicyConfig,
}


@dataclass(frozen=True)
class Scenario:
    """A resolved scenario: one frozen, validated config per section.

    Attributes:
        source: where it came from (a file path, or ``<defaults>``); not part of :meth:`to_dict`.
    """

    cluster: ClusterConfig = field(default_factory=ClusterConfig)
    prefill: PrefillConfig = field(default_factory=PrefillConfig)
    profile: ProfileConfig = field(default_factory=ProfileConfig)
    drafter: DrafterConfig = field(default_factory=DrafterConfig)
    acceptance: AcceptanceConfig = field(default_factory=AcceptanceConfig)
    engine: EngineConfig = field(default_factory=EngineConfig)
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    source: str = "<defaults>"

    def __post_init__(self) -> None:
        for name, cls in SECTIONS.items():
            if not isinstance(getattr(self, name), cls):
                got = type(getattr(self, name)).__name__
                raise SpecsimInputError(None, None, name, f"a {cls.__name__}", got)

    def to_dict(self) -> dict[str, dict[str, Any]]:
        """Plain nested dict of every section (the resolved scenario; ``None`` where a key is unset)."""
        return {name: asdict(getattr(self, name)) for name in SECTIONS}

    def hash(self) -> str:
        """sha256 (first 16 hex digits) of the resolved scenario's canonical JSON."""
        blob = json.dumps(self.to_dict(), sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:16]

    def with_updates(self, updates: dict[str, dict[str, Any]], src: str = "--set") -> "Scenario":
        """A copy with ``{section: {key: value}}`` applied and validated (table-valued keys merge).

        Raises:
            SpecsimInputError: unknown section or key, a value of the wrong type or out of range (naming
                ``src``).
        """
        return _apply(self, updates, src)


def describe_scenario() -> str:
    """Every scenario key with its type and default, one ``section.key: type = default`` line each.

    Generated from the dataclasses (which ``tests/test_scenario.py`` checks against default.toml).
    """
    lines = []
    for name, cls in SECTIONS.items():
        default = cls()
        for f in fields(cls):
            hint = str(f.type).replace("typing.", "")
            lines.append(f"{name}.{f.name}: {hint} = {getattr(default, f.name)!r}")
    return "\n".join(lines)


@cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


_BAD = object()   # _convert: "not convertible"
_WORDS = {bool: "true or false", int: "an int", float: "a finite float", str: "a string", dict: "a table"}


def _coerce(hint: Any, value: Any, name: str) -> Any:
    """``value`` as the declared type ``hint`` (plain Python values), or raise naming the field ``name``."""
    args = typing.get_args(hint)
    optional = isinstance(hint, types.UnionType) and type(None) in args
    base = next(a for a in args if a is not type(None)) if optional else hint
    base = typing.get_origin(base) or base
    if value is None and optional:
        return None
    out = _convert(base, value)
    if out is _BAD:
        want = _WORDS.get(base, base.__name__) + (" (or leave the key out)" if optional else "")
        raise SpecsimInputError(None, None, name, want, repr(value))
    return out



def _convert(base: type, value: Any) -> Any:
    if base is bool:
        return bool(value) if isinstance(value, (bool, np.bool_)) else _BAD
    if isinstance(value, (bool, np.bool_)):
        return _BAD
    if base is int:
        if isinstance(value, (int, np.integer)):
            return int(value)
        ok = isinstance(value, (float, np.floating)) and math.isfinite(value) and float(value).is_integer()
        return int(value) if ok else _BAD
    if base is float:
        ok = isinstance(value, (int, float, np.integer, np.floating)) and math.isfinite(value)
        return float(value) if ok else _BAD
    if base is str:
        return value if isinstance(value, str) else _BAD
    if base is dict:
        return dict(value) if isinstance(value, dict) else _BAD
    return value


def _apply(base: Scenario, updates: dict[str, Any], src: str, lines: dict[str, int] | None = None) -> Scenario:
    """``base`` with ``{section: {key: value}}`` applied; every error names ``src`` and, for a TOML file, the
    line of the key (``lines``: dotted key -> 1-based line, from :func:`_key_lines`)."""
    def line_of(name: str) -> int | None:
        while lines and name:
            if name in lines:
                return lines[name]
            name = name.rpartition(".")[0]
        return None
    new = {}
    for section, values in updates.items():
        if section not in SECTIONS:
            raise SpecsimInputError(src, line_of(section), section,
                                    f"a scenario section, one of {sorted(SECTIONS)}{did_you_mean(section, SECTIONS)}")
        if not isinstance(values, dict):
            raise SpecsimInputError(src, line_of(section), section, "a table of key = value", repr(values))
        cls = SECTIONS[section]
        cur = new.get(section, getattr(base, section))
        known = {f.name for f in fields(cls)}
        kw = {}
        for key, value in values.items():
            if key not in known:
                hint = (f"; policy knobs go in [policy.knobs]: --set policy.knobs.{key}=..."
                        if section == "policy" else "")
                raise SpecsimInputError(src, line_of(f"{section}.{key}"), f"{section}.{key}",
                                        f"a key of [{section}]{did_you_mean(key, known)}{hint}")
            old = getattr(cur, key)
            kw[key] = {**old, **value} if isinstance(old, dict) and isinstance(value, dict) else value
        try:
            new[section] = replace(cur, **kw)
        except SpecsimInputError as e:
            raise replace(e, file=src, line=e.line or line_of(e.field or section)) from None
    return replace(base, **new)


_TABLE = re.compile(r"^\s*\[\s*([^\[\]]+?)\s*\]")
_KEY = re.compile(r"^\s*([A-Za-z0-9_\-.\"' ]+?)\s*=")


def _key_lines(text: str) -> dict[str, int]:
    """Dotted key -> the 1-based line of a TOML text where it is first set (``[section]`` headers too).

    A line scan, enough to point an error at its line (tomllib keeps no positions): table headers set the
    prefix, ``key = value`` lines (dotted keys included) name ``prefix.key``; keys inside multi-line values
    or inline tables are attributed to the line that opens them.
    """
    out: dict[str, int] = {}
    prefix = ""
    for i, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0]
        m = _TABLE.match(line)
        if m and not line.lstrip().startswith("[["):
            prefix = ".".join(p.strip().strip("\"'") for p in m.group(1).split("."))
            out.setdefault(prefix, i)
            continue
        m = _KEY.match(line)
        if m:
            key = ".".join(p.strip().strip("\"'") for p in m.group(1).split("."))
            out.setdefault(f"{prefix}.{key}" if prefix else key, i)
    return out


def load_scenario(path: str | Path | None = None, overrides: list[str] | None = None) -> Scenario:
    """Load the bundled defaults, then ``path`` (if given), then ``--set section.key=value`` overrides.

    Raises:
        SpecsimInputError: unreadable or invalid TOML (with its line), unknown section or key, a value of the
            wrong type or outside its range, a malformed override.
    """
    scen = _apply(Scenario(), _read_toml(DEFAULT_SCENARIO), str(DEFAULT_SCENARIO))
    if path is not None:
        doc = _read_toml(Path(path))
        scen = _apply(scen, doc, str(path), _key_lines(Path(path).read_bytes().decode("utf-8")))
        scen = replace(scen, source=str(path))
        scen = _profile_beside(scen, doc, Path(path))
    for item in overrides or []:
        scen = _apply(scen, parse_override(item), f"--set {item}")
    return scen


def _profile_beside(scen: Scenario, doc: dict[str, Any], path: Path) -> Scenario:
    """A relative profile path the scenario file names resolves against the file's folder (issue 20), so a
    scenario and its profile travel together; a name that is not a file there (a bundled name, a path relative
    to the working folder) is kept as written."""
    name = doc.get("profile", {}).get("name") if isinstance(doc.get("profile"), dict) else None
    if not isinstance(name, str) or Path(name).is_absolute():
        return scen
    beside = path.parent / name
    if beside.suffix == ".json" and beside.is_file():
        return replace(scen, profile=replace(scen.profile, name=str(beside)))
    return scen


def _read_toml(path: Path) -> dict[str, Any]:
    """A scenario file's TOML tables; a missing, unreadable, non-UTF-8 or invalid file is a SpecsimInputError."""
    try:
        return tomllib.loads(path.read_bytes().decode("utf-8"))
    except FileNotFoundError:
        raise SpecsimInputError(str(path), None, None, "an existing scenario file", "no such file") from None
    except OSError as e:
        raise SpecsimInputError(str(path), None, None, "a readable scenario file",
                                e.strerror or type(e).__name__) from None
    except UnicodeDecodeError as e:
        line = path.read_bytes()[: e.start].count(b"\n") + 1
        raise SpecsimInputError(str(path), line, None, "a TOML file (UTF-8 text)", "undecodable bytes") from None
    except tomllib.TOMLDecodeError as e:
        m = re.search(r"at line (\d+)", str(e))
        line = getattr(e, "lineno", None) or (int(m.group(1)) if m else None)
        raise SpecsimInputError(str(path), line, None, "valid TOML", str(e).split(" (at")[0]) from None


def parse_override(item: str) -> dict[str, dict[str, Any]]:
    """Parse ``section.key=value`` or ``section.key.name=value`` (TOML syntax; bare words are strings).

    A dotted key reaches into a table: ``policy.knobs.threshold=0.5`` gives
    ``{"policy": {"knobs": {"threshold": 0.5}}}``.

    Raises:
        SpecsimInputError: not of the form section.key=value, or an empty part in the dotted key.
    """
    lhs = item.split("=", 1)[0]
    parts = [p.strip() for p in lhs.split(".")]
    if "=" not in item or len(parts) < 2 or not all(parts):
        raise SpecsimInputError("--set", None, item, "section.key=value (or section.key.name=value)")
    rhs = item.split("=", 1)[1].strip()
    try:
        value: Any = tomllib.loads(f"v = {rhs}")["v"]
    except tomllib.TOMLDecodeError:
        value = rhs
    for part in reversed(parts[1:]):
        value = {part: value}
    return {parts[0]: value}
