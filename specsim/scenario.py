"""Scenarios: typed, validated configuration of cluster, prefill, profile, drafter, acceptance and engine.

A scenario is a TOML file with the sections below (every key optional; defaults in
``specsim/scenarios/default.toml``). ``--set section.key=value`` overrides any key. Building a scenario has
no side effects; a run saves the resolved scenario (and its hash) beside its results.

.. code-block:: toml

    [cluster]
    num_replicas = 1            # decode serving instances
    gpus_per_replica = 1        # GPUs per decode instance (throughput per GPU divides by these)
    router = "round-robin"      # or "least-outstanding"
    max_num_seqs = 256          # running requests per replica
    kv_capacity_tokens = 110000 # KV-cache capacity per replica, tokens

    [prefill]
    mode = "disaggregated"      # or "colocated"
    num_instances = 1           # disaggregated: prefill pool size (one request at a time each)
    gpus_per_instance = 1
    time_per_token_s = 0.0      # > 0: fixed prefill cost per prompt token; 0: from the profile
    chunk_tokens = 512          # colocated: token budget per mixed step; disaggregated: chunk for profile lookup

    [profile]
    name = "h100-llama2-7b-tp1" # bundled name or a path to a profile JSON
    lookup = ""                 # "", "linear" or "padded" ("" keeps the file's rule)

    [drafter]
    name = "dspark"             # dspark, dflash, eagle3, mtp (mtp1 forces mtp; none forces none)

    [acceptance]
    sigma_request = 0.5         # latent difficulty spreads, logit scale (specsim.acceptance)
    ...

    [engine]
    gamma = 7                   # draft block length
    host_overhead_s = 0.0005    # CPU scheduling per step, hidden by ZOS only for fits_zos policies

    [policy]
    threshold = 0.3             # specdecpp's h; other policy knobs live here too
"""

from __future__ import annotations

import hashlib
import json
import re
import tomllib
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import numpy as np

from specsim.errors import SpecsimInputError

DEFAULT_SCENARIO = Path(__file__).resolve().parent / "scenarios" / "default.toml"


def _check(cond: bool, src: str, field_name: str, expected: str, got: Any) -> None:
    if not cond:
        raise SpecsimInputError(src, None, field_name, expected, repr(got))


@dataclass(frozen=True)
class ClusterConfig:
    """Decode side of the cluster (see module docstring for units)."""

    num_replicas: int = 1
    gpus_per_replica: int = 1
    router: str = "round-robin"
    max_num_seqs: int = 256
    kv_capacity_tokens: int = 110000

    def validate(self, src: str) -> None:
        _check(self.num_replicas >= 1, src, "cluster.num_replicas", "an int >= 1", self.num_replicas)
        _check(self.gpus_per_replica >= 1, src, "cluster.gpus_per_replica", "an int >= 1", self.gpus_per_replica)
        _check(self.router in ("round-robin", "least-outstanding"), src, "cluster.router",
               "'round-robin' or 'least-outstanding'", self.router)
        _check(self.max_num_seqs >= 1, src, "cluster.max_num_seqs", "an int >= 1", self.max_num_seqs)
        _check(self.kv_capacity_tokens >= 1, src, "cluster.kv_capacity_tokens", "an int >= 1",
               self.kv_capacity_tokens)


@dataclass(frozen=True)
class PrefillConfig:
    """Prefill: disaggregated pool or colocated chunked prefill."""

    mode: str = "disaggregated"
    num_instances: int = 1
    gpus_per_instance: int = 1
    time_per_token_s: float = 0.0
    chunk_tokens: int = 512

    def validate(self, src: str) -> None:
        _check(self.mode in ("disaggregated", "colocated"), src, "prefill.mode",
               "'disaggregated' or 'colocated'", self.mode)
        _check(self.num_instances >= 1, src, "prefill.num_instances", "an int >= 1", self.num_instances)
        _check(self.gpus_per_instance >= 1, src, "prefill.gpus_per_instance", "an int >= 1",
               self.gpus_per_instance)
        _check(self.time_per_token_s >= 0, src, "prefill.time_per_token_s", "a float >= 0",
               self.time_per_token_s)
        _check(self.chunk_tokens >= 1, src, "prefill.chunk_tokens", "an int >= 1", self.chunk_tokens)


@dataclass(frozen=True)
class ProfileConfig:
    """Which step-time profile the replicas use."""

    name: str = "h100-llama2-7b-tp1"
    lookup: str = ""

    def validate(self, src: str) -> None:
        _check(self.lookup in ("", "linear", "padded"), src, "profile.lookup", "'', 'linear' or 'padded'",
               self.lookup)


@dataclass(frozen=True)
class DrafterConfig:
    """The drafter used by speculative policies (mtp1 and none override it)."""

    name: str = "dspark"
    # Cost overrides, fractions of the target step at batch R (specsim.hardware.drafter.DrafterCost);
    # a negative value keeps the drafter family's documented default.
    base_fraction: float = -1.0
    per_draft_fraction: float = -1.0

    def validate(self, src: str) -> None:
        _check(self.name in ("dspark", "dflash", "eagle3", "mtp", "none"), src, "drafter.name",
               "one of dspark, dflash, eagle3, mtp, none", self.name)
        for key in ("base_fraction", "per_draft_fraction"):
            v = getattr(self, key)
            _check(np.isfinite(v) and v < 10, src, f"drafter.{key}", "a finite fraction (< 0 = default)", v)


@dataclass(frozen=True)
class AcceptanceConfig:
    """Acceptance model: rate table, latent difficulty, confidence distortion, calibration (specsim.acceptance).

    Defaults of the latent and confidence parameters are tuned to PAPER.md section 4 and 8.4 (values and
    measurements in docs/acceptance.md).
    """

    sigma_request: float = 1.03    # latent logit spread between requests
    sigma_step: float = 0.89       # between steps (anchors) of a request, shared by a block's positions
    sigma_token: float = 1.16      # between positions of a block
    sigma_conf: float = 0.54       # confidence noise (logit scale): how imperfectly the head sees the latent
    conf_scale: float = 1.07      # position 1: logit(c_raw) = conf_scale * (latent + noise) + conf_shift
    conf_shift: float = 0.34
    conf_scale_later: float = 1.12  # the same distortion at positions >= 2
    conf_shift_later: float = 0.19
    conf_low_ratio: float = 0.53   # slope multiplier where latent + noise < 0 (compresses the head's low end)
    constant_alpha: float = 0.0   # > 0: this conditional rate at every position and domain (closed forms)
    table: str = ""               # "" = fig2; fig2, fig4, dspark5, mtp, or a JSON rate table {"alpha": {...}}
    rates: dict = field(default_factory=dict)  # inline {domain = [a_1, ...]}, added over the table's rows
    model: str = ""               # "" latent model; "fitted:DIR" or "empirical:DIR" from `specsim fit`
    temperatures: str = ""        # "" = STS fitted at build time; or a `specsim calibrate` temperatures.json
    calibration: str = "sts"      # "sts" or "none" (policies then see raw confidences)

    def validate(self, src: str) -> None:
        for name in ("sigma_request", "sigma_step", "sigma_token", "sigma_conf", "constant_alpha"):
            v = getattr(self, name)
            _check(v >= 0, src, f"acceptance.{name}", "a float >= 0", v)
        for name in ("conf_scale", "conf_scale_later", "conf_low_ratio"):
            _check(getattr(self, name) > 0, src, f"acceptance.{name}", "a float > 0", getattr(self, name))
        _check(self.constant_alpha < 1, src, "acceptance.constant_alpha", "a float in [0, 1)",
               self.constant_alpha)
        _check(isinstance(self.rates, dict) and all(
            isinstance(r, list) and r and all(isinstance(x, (int, float)) and not isinstance(x, bool)
                                              and 0 < x < 1 for x in r) for r in self.rates.values()),
               src, "acceptance.rates", "a table {domain = [rates strictly in (0, 1)]}", self.rates)
        _check(self.model == "" or self.model.split(":", 1)[0] in ("fitted", "empirical") and ":" in self.model,
               src, "acceptance.model", "'', 'fitted:DIR' or 'empirical:DIR'", self.model)
        _check(self.calibration in ("sts", "none"), src, "acceptance.calibration", "'sts' or 'none'",
               self.calibration)


@dataclass(frozen=True)
class EngineConfig:
    """Per-step engine settings."""

    gamma: int = 7
    host_overhead_s: float = 0.0005

    def validate(self, src: str) -> None:
        _check(0 <= self.gamma <= 64, src, "engine.gamma", "an int in [0, 64]", self.gamma)
        _check(self.host_overhead_s >= 0, src, "engine.host_overhead_s", "a float >= 0 s", self.host_overhead_s)


@dataclass(frozen=True)
class PolicyConfig:
    """Policy knobs (each policy reads the ones it needs)."""

    threshold: float = 0.3

    def validate(self, src: str) -> None:
        _check(0.0 <= self.threshold <= 1.0, src, "policy.threshold", "a float in [0, 1]", self.threshold)


SECTIONS = {
    "cluster": ClusterConfig, "prefill": PrefillConfig, "profile": ProfileConfig,
    "drafter": DrafterConfig, "acceptance": AcceptanceConfig, "engine": EngineConfig,
    "policy": PolicyConfig,
}


@dataclass(frozen=True)
class Scenario:
    """A resolved scenario: one frozen config per section."""

    cluster: ClusterConfig = field(default_factory=ClusterConfig)
    prefill: PrefillConfig = field(default_factory=PrefillConfig)
    profile: ProfileConfig = field(default_factory=ProfileConfig)
    drafter: DrafterConfig = field(default_factory=DrafterConfig)
    acceptance: AcceptanceConfig = field(default_factory=AcceptanceConfig)
    engine: EngineConfig = field(default_factory=EngineConfig)
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    source: str = "<defaults>"

    def to_dict(self) -> dict[str, dict[str, Any]]:
        """Plain nested dict of every section (the resolved scenario)."""
        return {name: asdict(getattr(self, name)) for name in SECTIONS}

    def hash(self) -> str:
        """sha256 (first 16 hex digits) of the resolved scenario's canonical JSON."""
        blob = json.dumps(self.to_dict(), sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:16]

    def with_updates(self, updates: dict[str, dict[str, Any]], src: str = "--set") -> "Scenario":
        """A copy with ``{section: {key: value}}`` applied and validated."""
        return _apply(self, updates, src)


def _coerce(cls: type, key: str, value: Any, src: str, section: str) -> Any:
    """Coerce a TOML or --set value to the field's declared type, or raise naming the field."""
    ftype = {f.name: f.type for f in fields(cls)}[key]
    want = ftype if isinstance(ftype, str) else ftype.__name__
    try:
        if want == "int":
            if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
                raise ValueError
            return int(value)
        if want == "float":
            if isinstance(value, bool):
                raise ValueError
            out = float(value)
            if out != out:  # NaN
                raise ValueError
            return out
        if want == "str":
            if not isinstance(value, str):
                raise ValueError
            return value
    except (TypeError, ValueError):
        raise SpecsimInputError(src, None, f"{section}.{key}", f"a value of type {want}", repr(value)) from None
    return value


def _apply(base: Scenario, updates: dict[str, Any], src: str) -> Scenario:
    new = {}
    for section, values in updates.items():
        if section not in SECTIONS:
            raise SpecsimInputError(src, None, section, f"a scenario section, one of {sorted(SECTIONS)}")
        if not isinstance(values, dict):
            raise SpecsimInputError(src, None, section, "a table of key = value", repr(values))
        cls = SECTIONS[section]
        known = {f.name for f in fields(cls)}
        cur = new.get(section, getattr(base, section))
        kw = {}
        for key, value in values.items():
            if key not in known:
                raise SpecsimInputError(src, None, f"{section}.{key}", f"one of the keys {sorted(known)}")
            kw[key] = _coerce(cls, key, value, src, section)
        new[section] = replace(cur, **kw)
    out = replace(base, **new)
    for name in SECTIONS:
        getattr(out, name).validate(src)
    return out


def load_scenario(path: str | Path | None = None, overrides: list[str] | None = None) -> Scenario:
    """Load the bundled defaults, then ``path`` (if given), then ``--set section.key=value`` overrides.

    Raises:
        SpecsimInputError: unreadable or invalid TOML (with its line), unknown section or key, a value of the
            wrong type or outside its range, a malformed override.
    """
    scen = _apply(Scenario(), _read_toml(DEFAULT_SCENARIO), str(DEFAULT_SCENARIO))
    if path is not None:
        scen = _apply(scen, _read_toml(Path(path)), str(path))
        scen = replace(scen, source=str(path))
    for item in overrides or []:
        scen = _apply(scen, parse_override(item), f"--set {item}")
    return scen


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise SpecsimInputError(str(path), None, None, "an existing scenario file", "no such file") from None
    except tomllib.TOMLDecodeError as e:
        m = re.search(r"at line (\d+)", str(e))
        line = getattr(e, "lineno", None) or (int(m.group(1)) if m else None)
        raise SpecsimInputError(str(path), line, None, "valid TOML", str(e).split(" (at")[0]) from None


def parse_override(item: str) -> dict[str, dict[str, Any]]:
    """Parse ``section.key=value`` (value in TOML syntax; bare words are strings).

    Raises:
        SpecsimInputError: not of the form section.key=value.
    """
    if "=" not in item or "." not in item.split("=", 1)[0]:
        raise SpecsimInputError("--set", None, item, "section.key=value")
    lhs, rhs = item.split("=", 1)
    section, key = lhs.strip().split(".", 1)
    try:
        value = tomllib.loads(f"v = {rhs.strip()}")["v"]
    except tomllib.TOMLDecodeError:
        value = rhs.strip()
    return {section: {key: value}}
