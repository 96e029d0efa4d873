"""Scenarios: typed, validated configuration of the cluster, prefill, profile, drafter, acceptance, engine and policy.

A scenario is a TOML file with the sections ``[cluster]``, ``[prefill]``, ``[profile]``, ``[drafter]``,
``[acceptance]``, ``[engine]`` and ``[policy]`` (whose policy knobs are the table ``[policy.knobs]``). Every key is
optional. **The defaults live in one place**, ``specsim/scenarios/default.toml``, with the source of each number
beside it; the dataclasses below carry the same values (``tests/test_scenario.py`` checks that they agree, field by
field) and document what each key means, its unit and its range. :func:`specsim.scenario_schema.describe_scenario`
lists every key with its type and default, generated from the dataclasses.

TOML has no null: a key whose default is ``None`` ("the family default", "from the profile", "off") is left out of
the file, or commented out as ``default.toml`` does. In Python, pass ``None``.

Loading: the bundled defaults, then ``--scenario FILE``, then each ``--set section.key=value`` (value in TOML
syntax; a bare word is a string). A dotted key reaches into a table: ``--set policy.knobs.threshold=0.5`` and
``--set acceptance.rates.legal=[0.8,0.7]`` add one entry to the table (tables merge; other keys replace).

Every section is a frozen pydantic dataclass: its types are checked strictly by pydantic (``true``/``false`` only
for a bool, no string for a number, no NaN; numpy scalars and integral floats such as ``4096.0`` for an int are
accepted as the plain value), then its ranges by its own ``_validate``. So a config built in Python is checked
exactly like one loaded from TOML; the error (:class:`SpecsimInputError`) names the field
(``cluster.num_replicas``), the allowed range and the value, plus the file or ``--set`` item when it came from one.
:func:`specsim.scenario_schema.scenario_schema` is the JSON Schema of a scenario file, generated from the same
dataclasses (``docs/scenario.schema.json``; ``specsim scenario schema``). Building a scenario has no side effects; a
run saves the resolved scenario (and its hash) beside its results.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any, ClassVar, Literal

from specsim.errors import SpecsimInputError, did_you_mean
from specsim.sections import Bound, Section, later_override, typed_section
from specsim.tomlfile import json_beside, parse_override, read_toml

DEFAULT_SCENARIO = Path(__file__).resolve().parent / "scenarios" / "default.toml"

#: KV capacity per replica, tokens, when neither ``kv_capacity_tokens`` nor ``gpu_memory_utilization`` is set
#: (default.toml gives its derivation: Llama-2-7B fp16 on one 80 GB H100 at 90% memory utilisation).
DEFAULT_KV_CAPACITY_TOKENS = 110000

@dataclass(frozen=True, kw_only=True)
class LatentParams:
    """The latent acceptance model's nine parameters, with their tuned defaults (DSpark paper §3.2.1 and Figs. 5-6;
    values and measurements in docs/acceptance.md). The one declaration of these names and numbers: the
    scenario's ``[acceptance]`` section (:class:`AcceptanceConfig`) and
    :class:`specsim.acceptance.model.AcceptanceModel` both inherit them, and ``specsim fit`` reads
    :data:`LATENT_DEFAULTS` (default.toml repeats the values for readers; tests/test_scenario.py checks they
    agree). All are dimensionless, on the logit scale.

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
    """

    sigma_request: float = 1.03
    sigma_step: float = 0.89
    sigma_token: float = 1.16
    sigma_conf: float = 0.54
    conf_scale: float = 1.07
    conf_shift: float = 0.34
    conf_scale_later: float = 1.12
    conf_shift_later: float = 0.19
    conf_low_ratio: float = 0.53


#: :class:`LatentParams`' defaults by name, in declaration order.
LATENT_DEFAULTS: dict[str, float] = {f.name: f.default for f in fields(LatentParams)}

ROUTERS, KV_ALLOCATIONS = ("round-robin", "least-outstanding", "prefix-aware"), ("paged", "reserve")
PREFILL_MODES = ("disaggregated", "colocated")
#: Where a disaggregated request's first token is emitted (docs/memory.md, "TTFT under disaggregation").
FIRST_TOKEN_RULES = ("prefill", "decode-step")
#: Drafters that run on the host CPU, with no GPU layers (specsim.hardware.lookup_drafter).
LOOKUP_DRAFTERS = ("ngram", "suffix")
DRAFTERS = ("dspark", "dflash", "eagle3", "mtp", *LOOKUP_DRAFTERS, "none")
PROFILE_LOOKUPS, CALIBRATIONS = ("linear", "padded"), ("sts", "none")
#: What becomes of a request beyond the context window (docs/memory.md).
CONTEXT_OVERFLOWS = ("unservable", "truncate")
#: Where a request's first drafts are charged (docs/profiles.md, "When the drafter runs").
FIRST_DRAFTS_RULES = ("prefill-step", "decode-step")

@typed_section
class ClusterConfig(Section):
    """Decode side of the cluster and its KV-cache memory.

    Attributes:
        num_replicas: decode serving instances behind the router, int >= 1.
        gpus_per_replica: GPUs per decode instance (throughput per GPU divides by these), int >= 1; None (the
            default) = the profile's TP x PP (its metadata's ``tp`` and ``pp``, 1 where it gives none:
            :func:`specsim.run_config.replica_gpus`). A value other than the profile's is kept, with a notice.
        router: one of :data:`ROUTERS`; ``prefix-aware`` sends a request to the replica holding its longest
            cached prefix, ties broken by load.
        max_num_seqs: running requests per replica, int >= 1.
        kv_capacity_tokens: KV-cache capacity per replica in tokens, int >= ``block_size``; None =
            derived from the GPU memory (``gpu_memory_utilization``, 0.9 unset) for a step-model profile, which knows
            its model and GPU, else 110,000 tokens (:data:`DEFAULT_KV_CAPACITY_TOKENS`) for a plain table.
        gpu_memory_utilization: derive the KV capacity as vLLM does from this fraction of each GPU's memory,
            float in (0, 1] (:func:`specsim.hardware.kv_capacity.kv_capacity`); None = vLLM's 0.9 for a step-model
            profile, off for a plain table. Setting both in one file is an error; a later ``--set`` of either clears
            the other (:func:`specsim.sections.later_override`; ``--set cluster.KEY=none`` clears a key).
        kv_allocation: ``paged`` (blocks on demand, preemption by recompute when they run out, as vLLM V1)
            or ``reserve`` (the blocks of prompt + max output tokens reserved at admission, never preempts; a
            verify step never needs more: docs/memory.md).
        block_size: tokens per KV block, int >= 1.
        prefix_caching: share full KV blocks of identical prefixes between requests (vLLM's automatic
            prefix caching).
    """

    SECTION: ClassVar[str] = "cluster"
    BOUNDS: ClassVar[dict[str, Bound]] = {
        "num_replicas": Bound(1, noun="an int"), "max_num_seqs": Bound(1, noun="an int"),
        "gpus_per_replica": Bound(1, noun="an int", note=" (leave it out to take the profile's TP x PP)"),
        "block_size": Bound(1, noun="an int", note=" (tokens per KV block)"),
        "gpu_memory_utilization": Bound(0, 1, lo_open=True, noun="a fraction",
                                        note=" (leave it out to set kv_capacity_tokens)")}
    num_replicas: int = 1
    gpus_per_replica: int | None = None
    router: Literal[ROUTERS] = "round-robin"
    max_num_seqs: int = 256
    kv_capacity_tokens: int | None = None
    gpu_memory_utilization: float | None = None
    kv_allocation: Literal[KV_ALLOCATIONS] = "paged"
    block_size: int = 16
    prefix_caching: bool = True

    def _validate(self) -> None:
        self._check(self.kv_capacity_tokens is None or self.kv_capacity_tokens >= self.block_size,
                    "kv_capacity_tokens", f"an int >= cluster.block_size ({self.block_size})")
        self._check(self.gpu_memory_utilization is None or self.kv_capacity_tokens is None,
                    "gpu_memory_utilization", "no value while cluster.kv_capacity_tokens is set (set one of the two: "
                    "the capacity is derived from the GPU memory share)")


@typed_section
class PrefillConfig(Section):
    """Prefill: a disaggregated pool or colocated chunked prefill.

    Attributes:
        mode: ``disaggregated`` (a separate pool, one request at a time per instance) or ``colocated``
            (chunked prefill mixed into decode steps).
        num_instances: disaggregated prefill pool size, int >= 1.
        gpus_per_instance: GPUs per prefill instance, int >= 1; None = the profile's TP x PP (a prefill
            instance runs the decode replica's model at the profile's step times, so it needs as many GPUs).
        time_per_token_s: fixed prefill seconds per prompt token, float > 0; None = from the profile.
        chunk_tokens: colocated: token budget per mixed step; disaggregated: the chunk of the profile lookup;
            int >= 1.
        first_token: disaggregated: ``prefill`` (the first token at the end of prefill, the earlier rule and
            the default) or ``decode-step`` (with the decode replica's first step that includes the request,
            which recomputes the last prompt token: vLLM V1's KV-connector path; docs/memory.md).
    """

    SECTION: ClassVar[str] = "prefill"
    BOUNDS: ClassVar[dict[str, Bound]] = {
        "num_instances": Bound(1, noun="an int"), "chunk_tokens": Bound(1, noun="an int"),
        "gpus_per_instance": Bound(1, noun="an int", note=" (leave it out to take the profile's TP x PP)"),
        "time_per_token_s": Bound(0, lo_open=True, note=" s per prompt token (leave it out to take prefill time from "
                                  "the profile)")}
    mode: Literal[PREFILL_MODES] = "disaggregated"
    num_instances: int = 1
    gpus_per_instance: int | None = None
    time_per_token_s: float | None = None
    chunk_tokens: int = 512
    first_token: Literal[FIRST_TOKEN_RULES] = "prefill"


@typed_section
class ProfileConfig(Section):
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


@typed_section
class DrafterConfig(Section):
    """The drafter used by speculative policies (``mtp1`` and ``none`` override it).

    Cost fractions are of the target's step time at batch R (:class:`specsim.hardware.drafter.DrafterCost`).

    Attributes:
        name: one of :data:`DRAFTERS`.
        base_fraction: drafting cost independent of gamma, float in [0, 10); None = its shape's, else the family's.
        per_draft_fraction: cost per drafted position, float in [0, 10); None = its shape's, else the family's.
        kv_fraction: the drafter's own KV-cache tokens per target KV token, float >= 0; None = from the drafter's
            and the target's shapes on a step-model profile, else the family default.
        layers: draft layers of the target's layer config for the drafter's cost from its shape (profiles
            built by the step model), int >= 1; None = the drafter's default (dspark/dflash 5, eagle3 1,
            mtp 1; specsim.hardware.drafter.DRAFTER_LAYERS). Setting ``base_fraction`` or
            ``per_draft_fraction`` replaces the shape with the fraction model (0 allowed).
        block: the checkpoint's draft block, the largest gamma it drafts, int in [1, 64]; None = the drafter's
            default (dspark and dflash 7, the paper's checkpoints; eagle3 and mtp no limit;
            specsim.hardware.drafter.DRAFTER_BLOCK). A run with gamma above it is refused; set 12 or 16 for
            Fig. 4's longer-block drafters (DSpark paper §4.3.2).
        cpu_threads: threads of the ngram drafter's context scan, int in [1, 256]; None = 1, vLLM's as shipped
            (8 for an engine patched as vLLM PR 56732; no faster beyond 8; specsim.hardware.lookup_drafter).
            It applies to every ngram run, ``--drafter ngram`` included. ngram and suffix run on the host CPU: no
            layers, block, fractions or KV share, and no built-in acceptance table.
        match_rate: the share of request-steps a lookup drafter (ngram, suffix; only those) finds a match in, float
            in (0, 1]; None = 1. In the others the request verifies no draft and emits one token (vLLM's n-gram
            proposer returns none), its lookup's CPU time still paid (docs/acceptance.md, "CPU drafters").
    """

    SECTION: ClassVar[str] = "drafter"
    BOUNDS: ClassVar[dict[str, Bound]] = {
        "block": Bound(1, 64, noun="an int", note=", the checkpoint's draft block (leave it out for the drafter's "
                       "default)"),
        "layers": Bound(1, noun="an int", note=", draft layers (leave it out for the drafter's default)"),
        **dict.fromkeys(("base_fraction", "per_draft_fraction"), Bound(
            0, 10, hi_open=True, noun="a fraction of the target step", note=" (leave it out for the family default)")),
        "cpu_threads": Bound(1, 256, noun="an int", note=", the ngram drafter's scan threads (leave it out for "
                             "vLLM's 1)"),
        "match_rate": Bound(0, 1, lo_open=True, noun="a share", note=", or unset"),
        "kv_fraction": Bound(0, note=", drafter KV tokens per target KV token (leave it out for the family "
                             "default)")}
    name: Literal[DRAFTERS] = "dspark"
    base_fraction: float | None = None
    per_draft_fraction: float | None = None
    kv_fraction: float | None = None
    layers: int | None = None
    block: int | None = None
    cpu_threads: int | None = None
    match_rate: float | None = None

    def _validate(self) -> None:
        cost = ("set cpu_threads, its scan threads" if self.name == "ngram" else
                "one CPU lookup per drafting request, SUFFIX_REQUEST_S, with no setting")
        for key in ("base_fraction", "per_draft_fraction", "layers", "block", "kv_fraction"):
            self._check(self.name not in LOOKUP_DRAFTERS or getattr(self, key) is None, key,
                        f"no {key} with drafter {self.name} (it runs on the CPU, no GPU layers or KV: its cost "
                        f"is specsim.hardware.lookup_drafter's; {cost})")
        self._check(self.name != "suffix" or self.cpu_threads is None, "cpu_threads", "unset with drafter suffix "
                    "(the ngram drafter's scan threads; suffix decoding costs one CPU lookup per drafting request, "
                    "specsim.hardware.lookup_drafter.SUFFIX_REQUEST_S)")


#: The ``[acceptance]`` keys that give one drafter's measured acceptance, which ``acceptance.drafters.NAME``
#: may set for that drafter alone.
DRAFTER_ACCEPTANCE_KEYS = ("length", "length_gamma", "constant_alpha", "table", "rates", "model")


@typed_section
class AcceptanceConfig(Section, LatentParams):
    """Acceptance model: rate table, latent difficulty, confidence distortion, calibration
    (specsim.acceptance.model).

    The latent and confidence parameters are tuned to DSpark paper §3.2.1 and Figs. 5-6 (values and measurements
    in docs/acceptance.md).

    Attributes:
        sigma_request ... conf_low_ratio: the latent model's nine parameters (:class:`LatentParams`).
        constant_alpha: this conditional rate at every position and domain (closed forms), float in (0, 1);
            None = off.
        length: a measured acceptance length (tokens per verify step, bonus included, as vLLM reports it), float
            > 1: constant_alpha is solved from it (not beside constant_alpha); None = off.
        length_gamma: the drafts per step at which ``length`` was measured, int >= 1; None = the run's gamma.
        table: a built-in rate table (fig2, fig4, dspark5, mtp) or a JSON rate table ``{"alpha": {...}}``;
            None = fig2 (mtp for the MTP drafter).
        rates: inline ``{domain = [a_1, ...]}`` rows, rates strictly in (0, 1), added over the table's rows.
        model: ``fitted:DIR`` or ``empirical:DIR`` from ``specsim fit``; None = the latent model.
        temperatures: a ``specsim calibrate`` temperatures.json; None = STS fitted when the model is built.
        calibration: ``sts`` or ``none`` (policies then see raw confidences).
        drafters: one drafter's own measured acceptance, ``{drafter = {length = 2.4}}`` (``[acceptance.drafters.mtp]``
            in a file): for a run of that drafter, the scenario's or a policy's own (mtp1 runs mtp), these keys
            replace the section's own ``length``, ``length_gamma``, ``constant_alpha``, ``table``, ``rates`` and
            ``model``; the latent and confidence parameters,
            ``temperatures`` and ``calibration`` stay the section's. Empty = every drafter on the section's keys.
    """

    SECTION: ClassVar[str] = "acceptance"
    BOUNDS: ClassVar[dict[str, Bound]] = {
        **dict.fromkeys(("sigma_request", "sigma_step", "sigma_token", "sigma_conf"), Bound(0)),
        **dict.fromkeys(("conf_scale", "conf_scale_later", "conf_low_ratio"), Bound(0, lo_open=True)),
        "constant_alpha": Bound(0, 1, lo_open=True, hi_open=True, note=" (leave it out for the rate table)"),
        "length": Bound(1, lo_open=True, note=", tokens per verify step with the bonus token"),
        "length_gamma": Bound(1, noun="an int", note=" (drafts per step)"),
        "rates": Bound(0, 1, lo_open=True, hi_open=True, noun="a non-empty list of rates strictly")}
    constant_alpha: float | None = None
    length: float | None = None
    length_gamma: int | None = None
    table: str | None = None
    rates: dict[str, list[float]] = field(default_factory=dict)
    model: str | None = None
    temperatures: str | None = None
    calibration: Literal[CALIBRATIONS] = "sts"
    drafters: dict[str, dict[str, Any]] = field(default_factory=dict)

    def for_drafter(self, drafter: str) -> AcceptanceConfig:
        """This section as a run of ``drafter`` reads it: its ``drafters`` entry, where it has one, in place of
        the drafter-specific keys (:data:`DRAFTER_ACCEPTANCE_KEYS`), and no ``drafters`` table.

        Raises:
            SpecsimInputError: an entry's key or value out of range, named ``acceptance.drafters.NAME.KEY``.
        """
        if drafter not in self.drafters:
            return self
        own = self.drafters[drafter]
        cleared = {k: ({} if k == "rates" else None) for k in DRAFTER_ACCEPTANCE_KEYS}
        try:
            return replace(self, drafters={}, **{**cleared, **own})
        except SpecsimInputError as e:
            key = (e.field or "").rpartition("acceptance.")[2]
            raise replace(e, field=f"acceptance.drafters.{drafter}.{key}") from None

    def model_args(self, drafter: str) -> dict[str, Any]:
        """The keywords of :func:`specsim.acceptance.fitting.resolve_acceptance_model` for a run of ``drafter``
        (:meth:`for_drafter`, as a plain dict without the ``drafters`` table)."""
        args = asdict(self.for_drafter(drafter))
        del args["drafters"]
        return args

    def _validate(self) -> None:
        for name, own in self.drafters.items():      # each error names the entry, so a file's names its line
            if name not in DRAFTERS or name == "none":
                names = [d for d in DRAFTERS if d != "none"]
                why = " (none drafts nothing: no acceptance)" if name == "none" else did_you_mean(name, names)
                raise SpecsimInputError(None, None, f"acceptance.drafters.{name}",
                                        f"a drafter name, one of {names}{why}", repr(name))
            bad = next((k for k in own if k not in DRAFTER_ACCEPTANCE_KEYS), None)
            if bad is not None:
                raise SpecsimInputError(None, None, f"acceptance.drafters.{name}.{bad}",
                                        f"one of {list(DRAFTER_ACCEPTANCE_KEYS)} (the latent and confidence "
                                        "parameters are the section's, for every drafter)")
            if name == "mtp" and own.get("table") in ("fig2", "fig4", "dspark5"):
                raise SpecsimInputError(None, None, "acceptance.drafters.mtp.table", "for mtp a table with MTP "
                                        "rows: 'mtp' or a JSON table (fig2, fig4 and dspark5 hold the paper's "
                                        "drafters' rows; a run of mtp reads the mtp table from them), or mtp's "
                                        "measured length or rates", repr(own["table"]))
            self.for_drafter(name)
        self._check(self.length is None or self.constant_alpha is None, "length", "no acceptance.length beside "
                    "acceptance.constant_alpha (give one of the two)")
        self._check(self.length_gamma is None or self.length is not None, "length_gamma", "acceptance.length set "
                    "too (the acceptance length measured at these drafts; alone this key means nothing)")
        self._check(self.table is None or self.table != "", "table",
                    "fig2, fig4, dspark5, mtp or a JSON rate-table path (leave it out for the default table)")
        rate = self.BOUNDS["rates"]
        bad = next((d for d, r in self.rates.items() if not (r and all(map(rate.holds, r)))), None)
        if bad is not None:                 # the row's own key, so a scenario file's error names its line
            raise SpecsimInputError(None, None, f"{self.SECTION}.rates.{bad}", rate.expected(),
                                    repr(self.rates[bad]))
        self._check(self.model is None or (self.model.split(":", 1)[0] in ("fitted", "empirical")
                                           and self.model.split(":", 1)[-1] not in ("", self.model)), "model",
                    "'fitted:DIR' or 'empirical:DIR' (leave it out for the latent model)")
        self._check(self.temperatures is None or self.temperatures != "", "temperatures",
                    "a temperatures.json path (leave it out to fit STS at build time)")


@typed_section
class EngineConfig(Section):
    """Per-step and per-request engine costs.

    Attributes:
        gamma: draft block length, int in [0, 64].
        host_overhead_s: CPU scheduling seconds per step, hidden by ZOS only for policies that fix their
            batch early; float in [0, 1] (seconds, not ms).
        request_overhead_s: fixed seconds per request before it reaches the scheduler (API server,
            tokenisation); counted in TTFT; float in [0, 60] (seconds, not ms).
        emission_overhead_s: seconds per emitting request per step on the step's critical path (output
            processing, detokenisation); float in [0, 1] (seconds, not ms).
        max_model_len: the context window in tokens (prompt + output), int >= 1, as vLLM's ``--max-model-len``;
            None = the model's own (specsim.hardware.context: profile metadata, step model, config.json).
        context_overflow: a request beyond the window is ``unservable`` (with its reason, as vLLM refuses
            it) or ``truncate`` (its output cut to fit, as replay tools do).
        spec_step_s: speculation's own overhead per speculative step, seconds (issue 20: rejection sampling,
            draft metadata, the extra CPU-GPU synchronisation), float in [0, 0.05]; unset = the profile's own term
            where it states one (a step-model profile always does: sourced or fitted), else vLLM issue 49548's
            sourced default 7.75e-4 s (:class:`specsim.hardware.stepmodel.EngineTerms`), as for a measured table of
            plain forward passes; a value overrides the profile's (0 charges none). Each term resolves on its own
            (:func:`specsim.run_config.speculation_terms`), and a run's notice says both values and where each came
            from; charged only while speculation is configured.
        spec_request_s: the same overhead per running request in a speculative step, seconds, float in [0, 0.01];
            unset = the profile's own term, else vLLM issue 49548's sourced default 8.4e-5 s (same rules).
        spec_zero_draft_pays: whether a speculative step that drafts nothing still pays the two terms above: true
            for an engine that keeps its speculative path at zero drafts (vLLM's dynamic draft length at K = 0,
            vLLM issue 49548), false for one that runs the plain step (vLLM PR 5000's switch-off); unset = the
            profile's own (``spec_zero_draft_pays`` in its file; false where it says nothing).
        first_drafts: ``prefill-step``: a step drafts for the requests it prefills too, as vLLM's proposer does;
            ``decode-step``: for its decoding requests only (docs/profiles.md, "When the drafter runs").
        cudagraph_max_tokens: the engine's CUDA-graph capture limit, tokens (vLLM's ``max_cudagraph_capture_size``),
            int >= 0 (0: all eager); unset = the profile's. Step-model profiles only (a table is an error:
            :func:`specsim.hardware.capture.recapture`); ``profile_range.eager_steps`` counts steps beyond it.
    """

    SECTION: ClassVar[str] = "engine"
    BOUNDS: ClassVar[dict[str, Bound]] = {
        "gamma": Bound(0, 64, noun="an int"),
        **{key: Bound(0, most, note=" s (seconds, not ms), or left out (the profile's own term, or vLLM issue "
                      "49548's default where the profile states none)")
           for key, most in (("spec_step_s", 0.05), ("spec_request_s", 0.01))},
        "max_model_len": Bound(1, noun="an int", note=", tokens of context (leave it out for the model's own)"),
        "cudagraph_max_tokens": Bound(0, noun="an int", note=" tokens (0: no graphs; leave it out for the profile's)"),
        **{key: Bound(0, most, note=" s (seconds, not ms: 0.0005 is 0.5 ms)")
           for key, most in (("host_overhead_s", 1), ("request_overhead_s", 60), ("emission_overhead_s", 1))}}
    gamma: int = 7
    host_overhead_s: float = 0.0005
    request_overhead_s: float = 0.005
    emission_overhead_s: float = 0.0
    max_model_len: int | None = None
    context_overflow: Literal[CONTEXT_OVERFLOWS] = "unservable"
    spec_step_s: float | None = None
    spec_request_s: float | None = None
    spec_zero_draft_pays: bool | None = None
    first_drafts: Literal[FIRST_DRAFTS_RULES] = "prefill-step"
    cudagraph_max_tokens: int | None = None


@typed_section
class PolicyConfig(Section):
    """Policy knobs: ``[policy.knobs]`` name = value, passed to the policy when it is made.

    Which knobs exist, their defaults and ranges belong to each policy (an unknown knob is an error raised
    when the policy is made). Here only the shape is checked.

    Attributes:
        knobs: ``{name: value}``; a name is an identifier, a value a bool, int, float, string, a list of them (or
            of such lists: ``[[1, 16, 7], [17, 1024, 3]]``) or an inline table (``{16 = 3, 64 = 1}``).
    """

    SECTION: ClassVar[str] = "policy"
    knobs: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def _unknown_key_hint(cls, key: str, value: Any) -> str:
        if key in ("name", "policy", "policies"):          # the policy itself: a choice of the run, not a knob
            name = value if isinstance(value, str) and value else "NAME"
            return (f"; the policy is chosen per run, not in the scenario file: specsim run --policy {name}, "
                    f"specsim sweep --policies {name},..., or simulate(trace, {name!r}, scenario) in Python; "
                    "[policy] holds only the policy's knobs, as [policy.knobs]")
        return f"; policy knobs go in [policy.knobs]: --set policy.knobs.{key}=..."

    def _validate(self) -> None:
        for name, value in self.knobs.items():
            if not (isinstance(name, str) and name.isidentifier()):
                raise SpecsimInputError(None, None, "policy.knobs", "knob names that are identifiers",
                                        repr(name))
            if not _is_knob_value(value):
                raise SpecsimInputError(None, None, f"policy.knobs.{name}", "a bool, int, finite float, string, a "
                                        "list (or list of lists) or table of them", repr(value))


def _is_knob_value(value: Any, depth: int = 0) -> bool:
    if isinstance(value, list) and depth < 2:         # a list, or a list of lists (vllm-dsd's [[1, 16, 7], ...])
        return all(_is_knob_value(v, depth + 1) for v in value)
    if isinstance(value, dict) and depth == 0:       # a TOML inline table: draft_len_schedule = {16 = 3, 64 = 1}
        return all(isinstance(k, str) and _is_knob_value(v, 2) for k, v in value.items())
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
        """Plain nested dict of every section (``None`` where a key is unset; an empty ``acceptance.drafters`` and an
        unset ``engine.cudagraph_max_tokens`` left out: a scenario without them keeps its hash and cached points)."""
        out = {name: asdict(getattr(self, name)) for name in SECTIONS}
        for section, key in (("acceptance", "drafters"), ("engine", "cudagraph_max_tokens")):
            if out[section][key] in ({}, None):
                del out[section][key]
        return out

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


def _apply(base: Scenario, updates: dict[str, Any], src: str, lines: dict[str, int] | None = None) -> Scenario:
    """``base`` with ``{section: {key: value}}`` applied (a table-valued key merges, other keys replace), each
    changed section validated again by pydantic; every error names ``src`` and, for a TOML file, the line of
    the key (``lines``: dotted key -> 1-based line, from :func:`specsim.tomlfile.read_toml`)."""
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
        cur = new.get(section, getattr(base, section))
        merged = {key: _merged(getattr(cur, key, None), value, deep=(section, key) == ("acceptance", "drafters"))
                  for key, value in values.items()}
        try:
            new[section] = replace(cur, **merged)
        except SpecsimInputError as e:
            raise replace(e, file=src, line=e.line or line_of(e.field or section)) from None
    return replace(base, **new)


def _merged(old: Any, value: Any, deep: bool = False) -> Any:
    """A table-valued key's new value: ``value``'s entries over ``old``'s (one level; ``deep``: an entry that is a
    table in both merges too, so ``--set acceptance.drafters.mtp.length_gamma=1`` keeps mtp's length); any other
    key's value replaces."""
    if not (isinstance(old, dict) and isinstance(value, dict)):
        return value
    return {**old, **{k: {**old[k], **v} if deep and isinstance(old.get(k), dict) and isinstance(v, dict) else v
                      for k, v in value.items()}}


def load_scenario(path: str | Path | None = None, overrides: list[str] | str | None = None) -> Scenario:
    """Load the bundled defaults, then ``path`` (if given), then ``--set section.key=value`` overrides (a list of
    them, or one as a string; each as :func:`specsim.sections.later_override` says: ``none`` clears a key).

    Raises:
        SpecsimInputError: unreadable or invalid TOML (with its line), unknown section or key, a value of the
            wrong type or outside its range, a malformed override.
    """
    scen = _apply(Scenario(), read_toml(DEFAULT_SCENARIO)[0], str(DEFAULT_SCENARIO))
    if path is not None:
        doc, lines = read_toml(Path(path))
        scen = _apply(scen, doc, str(path), lines)
        scen = replace(scen, source=str(path))
        scen = _profile_of_file(scen, doc, Path(path), lines)
    for item in [overrides] if isinstance(overrides, str) else overrides or []:
        scen = _apply(scen, later_override(scen, parse_override(item), f"--set {item}"), f"--set {item}")
    return scen


def _profile_of_file(scen: Scenario, doc: dict[str, Any], path: Path, lines: dict[str, int]) -> Scenario:
    """The scenario file's ``[profile]``: it names its profile (without ``name`` the run would take the default
    profile, another model and GPU, without a word), and a relative profile path it names resolves against the
    file's folder (issue 20), so a scenario and its profile travel together (:func:`specsim.tomlfile.json_beside`).

    Raises:
        SpecsimInputError: a ``[profile]`` table (or ``profile.KEY`` line) without ``name``, at its line.
    """
    table = doc.get("profile")
    if not isinstance(table, dict):
        return scen
    if "name" not in table:
        line = lines.get("profile", min((n for k, n in lines.items() if k.startswith("profile.")), default=None))
        raise SpecsimInputError(str(path), line, "profile.name", "a [profile] table that names its profile: name = a "
                                "bundled profile (specsim profile list) or a profile JSON path (name = "
                                f"{ProfileConfig.name!r} keeps the default, Llama-2-7B on one H100; a scenario without "
                                "[profile] runs it too)", "a [profile] table without name")
    return replace(scen, profile=replace(scen.profile, name=json_beside(table["name"], path)))
