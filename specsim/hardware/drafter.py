"""Drafter cost models: seconds to draft gamma tokens for R running requests.

Families (DESIGN.md vocabulary): ``none`` (no drafter), ``mtp`` (one MTP module step per draft),
``parallel`` (DFlash-style: one drafter forward over R x gamma positions, nearly flat in gamma),
``autoregressive`` (EAGLE-style: gamma sequential drafter forwards), ``semi-autoregressive`` (DSpark:
parallel backbone plus a light sequential head per position).

Costs are expressed as fractions of the target's step time at batch R (the drafter shares the GPU
and its kernels scale with the same batch). Default fractions are documented in ``DRAFTER_FAMILIES``.
With a drafter profile (``DrafterCost(..., drafter_profile=p)``, a :class:`StepTimeProfile` of the
drafter itself, e.g. from ``specsim profile measure``) the time comes from it instead:

* parallel: ``p.step_time(R * gamma)`` (one forward over R x gamma positions);
* autoregressive, mtp: ``gamma * p.step_time(R)`` (gamma sequential forwards of R tokens);
* semi-autoregressive: the parallel time plus ``gamma * per_draft_fraction_head * target_step(R)``
  for the sequential head (DSpark paper §4.3.2: +0.2% of a round at draft length 4 to +1.3% at 16).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from specsim.errors import SpecsimInputError
from specsim.hardware.lookup_drafter import LookupDrafterCost
from specsim.hardware.profile import StepTimeProfile


@dataclass(frozen=True)
class DrafterCost:
    """Draft time model: ``t = target_step(R) * (base_fraction + per_draft_fraction * gamma)``.

    Args:
        family: one of the families in the module docstring.
        base_fraction: cost independent of gamma, as a fraction of the target step at batch R.
        per_draft_fraction: cost per drafted position, same unit.
    """

    family: str
    base_fraction: float
    per_draft_fraction: float
    drafter_profile: StepTimeProfile | None = None
    head_fraction: float = 0.001

    def draft_time_s(self, num_requests: int, gamma: int, profile: StepTimeProfile,
                     kv_tokens: float = 0.0) -> float:
        """Seconds to draft ``gamma`` tokens for each of ``num_requests`` requests (0 for ``none``).

        Args:
            num_requests: R, requests drafting this step.
            gamma: draft tokens per request.
            profile: the target's profile (fractions are of ``profile.step_time(R)``).
            kv_tokens: KV tokens the drafter reads (used only with a drafter profile).
        """
        if self.family == "none" or num_requests == 0 or gamma == 0:
            return 0.0
        base = profile.step_time(min(num_requests, profile.max_batch_tokens))
        d = self.drafter_profile
        if d is None:
            return float(base * (self.base_fraction + self.per_draft_fraction * gamma))
        if self.family in ("autoregressive", "mtp"):
            return float(gamma * d.step_time(min(num_requests, d.max_batch_tokens), kv_tokens))
        par = d.step_time(min(num_requests * gamma, d.max_batch_tokens), kv_tokens)
        head = gamma * self.head_fraction * base if self.family == "semi-autoregressive" else 0.0
        return float(par + head)


# Defaults (documented choices; derivations in docs/profiles.md "Drafter cost models"):
# DSpark paper §4.3.2 per-draft numbers: DFlash round +2.6% from length 4 to 16 = 12 more drafts -> 0.0022 of a
# round (~0.002 of a target step) per draft; DSpark's Markov head adds (1.3% - 0.2%) / 12 ~ 0.001 per draft.
# - parallel: a 5-layer drafter on a 36-layer target ~ 5/36 ~ 0.14 of a target step, nearly flat in gamma
#   (DSpark paper §4.3.2: DFlash round time grows 2.6% from draft length 4 to 16 at batch 128).
# - semi-autoregressive: parallel plus the Markov head's serial sampling loop, +0.2% (len 4) to +1.3%
#   (len 16) of a whole round (DSpark paper §4.3.2) ~ 0.001 of a step per position on top of parallel.
# - autoregressive: one 1-layer EAGLE head forward per draft ~ 1/36 of a target step each.
# - mtp: one MTP module (one transformer block) per draft ~ 1/61 of a DeepSeek-V3 step each.
DRAFTER_FAMILIES: dict[str, DrafterCost] = {
    "none": DrafterCost("none", 0.0, 0.0),
    "parallel": DrafterCost("parallel", 0.14, 0.002),
    "semi-autoregressive": DrafterCost("semi-autoregressive", 0.14, 0.003),
    "autoregressive": DrafterCost("autoregressive", 0.0, 0.028),
    "mtp": DrafterCost("mtp", 0.0, 0.016),
}

DRAFTER_FAMILY_OF = {"none": "none", "mtp": "mtp", "eagle3": "autoregressive",
                     "dflash": "parallel", "dspark": "semi-autoregressive", "ngram": "lookup", "suffix": "lookup"}


#: Drafter shapes by name (DSpark paper §3.1, §4.1): layers of the target's own layer config ("draft layers reuse
#: the target layer config", DSpark paper §3.1) and the Markov head's rank (dspark, §3.1: markov_rank 256).
#: dspark / dflash: 5 draft layers (DSpark paper §3.1, offline config of all four targets); eagle3: 1 layer
#: (DSpark paper §4.1); mtp: one MTP module, one transformer block of the target (DeepSeek-V3 report).
DRAFTER_LAYERS = {"dspark": 5, "dflash": 5, "eagle3": 1, "mtp": 1}
MARKOV_RANK = 256

#: The checkpoint's draft block (``drafter.block``): the most drafts one step may propose. The paper's DSpark
#: and DFlash drafters are trained with block_size 7 for all four targets (DSpark paper §3.1: "block_size gamma =
#: 7"); longer blocks are other checkpoints (Fig. 4's length-12 and length-16 drafters, DSpark paper §4.3.2), chosen
#: by setting ``drafter.block``. EAGLE-3 and MTP draft autoregressively: no block (None).
DRAFTER_BLOCK = {"dspark": 7, "dflash": 7}
HEAD_KERNELS = 4          # per head position: embedding gather, rank-256 bias GEMM, add, sample
#: EAGLE-3's reduced draft vocabulary (``draft_vocab_size`` of its checkpoints, e.g. SpecForge's
#: ``configs/llama3-8B-eagle3.json`` and the EAGLE-3 reference configs: 32,000 of the target's 128,256 tokens).
EAGLE3_DRAFT_VOCAB = 32000


@dataclass(frozen=True, eq=False)
class ShapedDrafterCost:
    """Draft time from the drafter's own shape through the target's step model (issue 12).

    The drafter is ``layers`` layers of the target's layer config on the same GPU (:class:`StepModel` of the
    target with ``num_layers = layers``; its per-request and fixed step costs are the target step's, so 0
    here), plus the target's LM head and sampling over every drafted position. Passes per family:

    * parallel (dflash): one forward over R x gamma positions (CUDA-graph padded);
    * semi-autoregressive (dspark): the parallel forward plus gamma sequential Markov-head passes over R
      tokens, each a rank-``MARKOV_RANK`` x vocabulary bias GEMM and ``HEAD_KERNELS`` kernels (the sampling
      of every position is already in the parallel forward);
    * autoregressive (eagle3), mtp: gamma forwards over R tokens.

    Each forward reads the drafter's KV: ``kv_tokens x`` its KV bytes per token (``layers`` layers).

    Args:
        family: a key of :data:`DRAFTER_FAMILIES` except ``none``.
        model: the drafter's :class:`~specsim.hardware.stepmodel.StepModel`.
    """

    family: str
    model: object
    _tables: dict = field(default_factory=dict, repr=False)

    def _table(self, gamma: int, size: int) -> np.ndarray:
        """(size + 1,) seconds at R = 0..size for ``gamma`` drafts, without the KV read (cached per gamma)."""
        have = self._tables.get(gamma)
        if have is not None and have.size > size:
            return have
        n = max(size, 2 * (have.size if have is not None else 64))
        r = np.arange(n + 1, dtype=np.float64)
        sm = self.model
        if self.family in ("autoregressive", "mtp"):
            t = gamma * sm.step_time(sm.graph_tokens(r), r, 0.0)
        else:
            t = sm.step_time(sm.graph_tokens(r * gamma), r, 0.0)
            if self.family == "semi-autoregressive":
                t = t + gamma * _head_s(sm, sm.graph_tokens(r))
        t[0] = 0.0
        self._tables[gamma] = t
        return t

    def draft_time_s(self, num_requests: int, gamma: int, profile: StepTimeProfile, kv_tokens: float = 0.0) -> float:
        """Seconds to draft ``gamma`` tokens for each of ``num_requests`` requests (``profile`` unused: the
        drafter has its own shape; the argument keeps :class:`DrafterCost`'s signature)."""
        if num_requests == 0 or gamma == 0:
            return 0.0
        passes = gamma if self.family in ("autoregressive", "mtp") else 1
        return float(self._table(gamma, num_requests)[num_requests]
                     + passes * self.model.kv_read_s_per_token * kv_tokens)


def _head_s(sm, r: np.ndarray) -> np.ndarray:
    """Seconds of one Markov-head position over r requests beyond the parallel pass (which already samples
    every position): the bias GEMM (r x rank -> vocab) and ``HEAD_KERNELS`` kernels."""
    return np.where(r > 0, sm._gemm(r, sm.model.vocab, MARKOV_RANK) + HEAD_KERNELS * sm.terms.kernel_s, 0.0)


def drafter_layers(drafter: str, layers: int | None = None) -> int:
    """The drafter's layer count: ``layers``, else its :data:`DRAFTER_LAYERS` default.

    Raises:
        SpecsimInputError: an unknown drafter, layers < 1.
    """
    if drafter not in DRAFTER_LAYERS:
        raise SpecsimInputError(None, None, "drafter", f"one of {sorted(DRAFTER_LAYERS)}", repr(drafter))
    n = DRAFTER_LAYERS[drafter] if layers is None else layers
    if n < 1:
        raise SpecsimInputError(None, None, "drafter.layers", "an int >= 1", repr(layers))
    return n


def shaped_drafter_cost(drafter: str, target, layers: int | None = None) -> ShapedDrafterCost:
    """The :class:`ShapedDrafterCost` of drafter ``drafter`` (``dspark``, ``dflash``, ``eagle3``, ``mtp``) on
    the target's :class:`~specsim.hardware.stepmodel.StepModel` ``target``.

    Args:
        layers: draft layers (default :data:`DRAFTER_LAYERS`).

    Raises:
        SpecsimInputError: unknown drafter, layers < 1.
    """
    n = drafter_layers(drafter, layers)
    sm = replace(target, model=drafter_shape(drafter, target.model, n),
                 terms=replace(target.terms, per_request_step_s=0.0, fixed_step_s=0.0))
    return ShapedDrafterCost(DRAFTER_FAMILY_OF[drafter], sm)


def drafter_kv_fraction(drafter: str, target, layers: int | None = None) -> float:
    """The drafter's KV bytes per target KV byte, per token, from the two shapes (issue 20): the KV of the
    drafter's own layers (:func:`drafter_shape`) over the target's on the same GPU (``target``: its
    :class:`~specsim.hardware.stepmodel.StepModel`; a hybrid target's linear-attention layers hold no KV).

    Raises:
        SpecsimInputError: an unknown drafter, layers < 1.
    """
    n = drafter_layers(drafter, layers)
    mine = drafter_shape(drafter, target.model, n).kv_bytes_per_token(target.tp)
    return float(mine / target.model.kv_bytes_per_token(target.tp))


#: Target hidden states a drafter's input projection fuses (a BF16 ``n x hidden -> hidden`` GEMM, replicated over TP):
#: EAGLE-3 three (low, middle and high layers; EAGLE-3 paper, section 3), MTP two (the embedding and the previous
#: hidden state, DeepSeek-V3's ``eh_proj``; technical report, section 2.2), DSpark eight (the public checkpoint
#: ``RedHatAI/Qwen3.8-27B-speculator.dspark``: an 8 x 5120 -> 5120 projection, docs/validation.md), DFlash as DSpark
#: (no other count was found in our sources).
FEATURE_INPUTS = {"eagle3": 3, "mtp": 2, "dspark": 8, "dflash": 8}


def drafter_weight_bytes(drafter: str, target, layers: int | None = None) -> float:
    """Bytes of the drafter's own weights on one GPU of ``target`` (its
    :class:`~specsim.hardware.stepmodel.StepModel`), which vLLM loads beside the target and so takes from the KV
    pool's memory: the layers of :func:`drafter_shape` without embedding and LM head (the target's, shared), the
    input projection (:data:`FEATURE_INPUTS`), EAGLE-3's own draft-vocabulary head and DSpark's Markov head (two
    ``MARKOV_RANK x vocabulary`` factors, as the public checkpoint holds: its 1,988,431,617 parameters are five
    plain Qwen3 layers, the projection and these two factors). The layers follow the cost model's shape (five of
    Qwen3.8-27B's gated-attention layers: 2.20e9 parameters against the checkpoint's 1.99e9).

    Raises:
        SpecsimInputError: an unknown drafter, layers < 1.
    """
    n = drafter_layers(drafter, layers)
    m, tp, bf16 = target.model, target.tp, 2.0
    shape = drafter_shape(drafter, m, n)
    ep = target.ep if shape.num_experts else 1
    own = shape.weight_bytes(tp, ep) - shape._embedding_params() / tp * bf16    # embedding and head: shared
    own += FEATURE_INPUTS[drafter] * m.hidden * m.hidden * bf16
    if drafter == "eagle3":
        own += shape.vocab * m.hidden * bf16 / tp                                        # its own reduced head
    if drafter == "dspark":
        own += 2 * MARKOV_RANK * m.vocab * bf16 / tp
    return float(own)


def drafter_shape(drafter: str, m, layers: int, draft_vocab: int = EAGLE3_DRAFT_VOCAB):
    """The drafter's own :class:`~specsim.hardware.model_config.ModelConfig` from the target's ``m`` (issue 20).

    * eagle3: ``layers`` dense decoder layers at the target's hidden size (EAGLE-3's draft layer is a plain
      Llama layer even on a MoE target: its MLP is the target's dense ``ffn``, or top-k experts' worth where the
      target has no dense layer) and a head over ``draft_vocab`` tokens (:data:`EAGLE3_DRAFT_VOCAB`);
    * mtp: ``layers`` target-shaped layers (a MoE layer on a MoE target, as DeepSeek-V3's MTP module is) with
      the target's own head;
    * dspark / dflash: ``layers`` layers of the target's layer config (DSpark paper §3.1), softmax attention.
    """
    name = f"{drafter}-drafter-of-{m.name}"
    if drafter == "eagle3":
        ffn = m.ffn or m.expert_ffn * max(1, m.top_k)
        return replace(m, name=name, num_layers=layers, linear_layers=0, num_experts=0, top_k=0, expert_ffn=0,
                       num_shared_experts=0, first_dense_layers=0, shared_expert_ffn=0, ffn=ffn,
                       vocab=min(draft_vocab, m.vocab), tie_embeddings=False)
    dense = 0 if drafter == "mtp" else min(m.first_dense_layers, layers)
    return replace(m, name=name, num_layers=layers, linear_layers=0, first_dense_layers=dense)


def drafter_cost(drafter: str, cpu_threads: int | None = None) -> DrafterCost | LookupDrafterCost:
    """The default cost model of a named drafter (``mtp``, ``eagle3``, ``dflash``, ``dspark``, ``none``; the CPU
    drafters ``ngram`` and ``suffix`` get their :class:`~specsim.hardware.lookup_drafter.LookupDrafterCost`, the
    n-gram scan on ``cpu_threads`` threads, default vLLM's 1).

    Raises:
        SpecsimInputError: unknown drafter name.
    """
    fam = DRAFTER_FAMILY_OF.get(drafter)
    if fam is None:
        raise SpecsimInputError(None, None, "drafter", f"one of {sorted(DRAFTER_FAMILY_OF)}", repr(drafter))
    if fam == "lookup":
        return LookupDrafterCost(drafter) if cpu_threads is None else LookupDrafterCost(drafter, int(cpu_threads))
    return DRAFTER_FAMILIES[fam]
