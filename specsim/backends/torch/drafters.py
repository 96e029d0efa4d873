"""Drafters: autoregressive (EAGLE-style), parallel (DFlash-style) and DSpark semi-autoregressive.

All three read the target's context features (DSpark paper §3.1): the outputs of a few target
decoder layers at the positions before the anchor, concatenated, projected by W_c (no bias) and
RMS-normalised, H_ctx = RMSNorm(W_c [H(l1); ...; H(lm)]). They share the target's frozen embedding and
LM head (not stored in drafter checkpoints). The drafter width equals the target's hidden size d.
For cost, a drafter reads only the last ``window`` context positions.

* :class:`ParallelDrafter` (``parallel``, DFlash-style): input slots [anchor, mask x (gamma-1)] plus a
  learned slot embedding (instead of RoPE offsets), layers whose keys/values are [H_ctx ; block],
  bidirectional inside the block; one pass gives h_1..h_gamma and base logits U_k = lm_head(h_k).
  The anchor slot predicts the first draft (DSpark's layout, DSpark paper §3.1). Confidence: the drafter's
  own probability of its drafted token, q_k(x_k) (EAGLE-2's proxy; this drafter has no head).
* :class:`AutoregressiveDrafter` (``autoregressive``, EAGLE-style): step k feeds
  fc([g_{k-1} ; embed(x_{k-1})]) through one layer attending to [H_ctx ; h_1..h_{k-1}], with
  g_0 = the projected feature of the last context position and x_0 = the anchor; g_k = h_k. Trained
  with training-time test (its own h unrolled, tokens teacher-forced). Confidence: q_k(x_k).
* :class:`DSparkDrafter` (``semi-autoregressive``): the parallel backbone plus the Markov head,
  p_k(v) = softmax_v(U_k(v) + (W1[x_{k-1}] W2)(v)) (DSpark paper §3.1, Eq. 4-6; x_0 = anchor; no bias terms,
  shared across positions), and the confidence head c_k = sigmoid(w . [h_k ; W1[x_{k-1}]] + b)
  (DSpark paper §3.2.1). The paper uses rank r = 256 on a 152k vocabulary; we default to r = 16 so the
  two V x r tables stay small for SmolLM2's 49,152-token vocabulary (1.6 M parameters at r = 16).
* :class:`TableDrafter`: a fixed first-order table q(x_k | x_{k-1}) with a table of confidences
  c_k = conf_table[k-1, x_{k-1}], for exact tests (DSpark paper Appendix A).

``propose`` returns drafted tokens (R, gamma), draft probabilities q (R, gamma, V) at the sampling
temperature (exact softmaxes, as rejection sampling needs) and raw confidences (R, gamma).
Sampling uses supplied uniforms (from numpy Generators), by inverse CDF.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from specsim.backends.torch.models import checkpoint_problem, read_checkpoint, rms_norm

FAMILIES = ("autoregressive", "parallel", "semi-autoregressive")


@dataclass
class DraftBlock:
    """One step's drafts. tokens (R, gamma) int64; q (R, gamma, V) draft probabilities; conf_raw (R, gamma)."""

    tokens: torch.Tensor
    q: torch.Tensor
    conf_raw: torch.Tensor


def sample_inverse_cdf(probs: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """Sample one index per row of ``probs`` (N, V) with uniforms ``u`` (N,) in [0, 1) by inverse CDF.

    A zero-probability index is never returned (the CDF does not rise there).
    """
    cdf = torch.cumsum(probs, dim=-1)                                    # (N, V)
    target = (u.to(cdf.dtype) * cdf[:, -1]).unsqueeze(1)                 # (N, 1) scaled to the total mass
    idx = torch.searchsorted(cdf, target, right=True).squeeze(1)
    return idx.clamp_(max=probs.shape[-1] - 1)


def pick_tokens(logits: torch.Tensor, temperature: float, greedy: bool, u: torch.Tensor
                ) -> tuple[torch.Tensor, torch.Tensor]:
    """(N, V) logits -> (token (N,), probs (N, V)): argmax when greedy, else an inverse-CDF sample from
    softmax(logits / T)."""
    probs = torch.softmax(logits / (1.0 if greedy else temperature), dim=-1)
    tok = logits.argmax(-1) if greedy else sample_inverse_cdf(probs, u)
    return tok, probs


class _Layer(nn.Module):
    """Pre-norm attention + SwiGLU-free MLP layer; queries from the block, keys/values [context ; block]."""

    def __init__(self, d: int, n_heads: int) -> None:
        super().__init__()
        self.n_heads = n_heads
        self.norm_q, self.norm_kv, self.norm_mlp = (nn.Parameter(torch.ones(d)) for _ in range(3))
        self.q, self.kv, self.o = nn.Linear(d, d, bias=False), nn.Linear(d, 2 * d, bias=False), nn.Linear(d, d, bias=False)
        self.mlp = nn.Sequential(nn.Linear(d, 2 * d, bias=False), nn.SiLU(), nn.Linear(2 * d, d, bias=False))

    def forward(self, x: torch.Tensor, ctx: torch.Tensor, ctx_mask: torch.Tensor,
                block_mask: torch.Tensor | None = None) -> torch.Tensor:
        """x (R, Lq, d) block; ctx (R, W, d) projected context; ctx_mask (R, W) bool valid;
        block_mask (Lq, Lq) bool or None (None = bidirectional within the block)."""
        R, Lq, d = x.shape
        h = rms_norm(x, self.norm_q)
        mem = torch.cat([ctx, h], dim=1)                                  # (R, W + Lq, d)
        k, v = self.kv(rms_norm(mem, self.norm_kv)).split(d, dim=2)
        q = self.q(h)
        hd = d // self.n_heads
        q, k, v = (t.view(R, -1, self.n_heads, hd).transpose(1, 2) for t in (q, k, v))
        bm = torch.ones(Lq, Lq, dtype=torch.bool, device=x.device) if block_mask is None else block_mask
        mask = torch.cat([ctx_mask[:, None, :].expand(R, Lq, -1), bm[None].expand(R, -1, -1)], dim=2)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask[:, None])   # (R, heads, Lq, hd)
        x = x + self.o(y.transpose(1, 2).reshape(R, Lq, d))
        return x + self.mlp(rms_norm(x, self.norm_mlp))


class _Base(nn.Module):
    """Shared parts: context projection W_c + RMSNorm, final norm, frozen target embedding and LM head."""

    family = "base"

    def __init__(self, target, gamma: int, n_layers: int, n_heads: int, window: int) -> None:
        super().__init__()
        d = target.hidden_size
        self.gamma, self.window, self.d = gamma, window, d
        self.config = dict(gamma=gamma, n_layers=n_layers, n_heads=n_heads, window=window)
        self.ctx_proj = nn.Linear(target.feature_dim, d, bias=False)
        self.ctx_norm = nn.Parameter(torch.ones(d))
        self.out_norm = nn.Parameter(torch.ones(d))
        self.layers = nn.ModuleList(_Layer(d, n_heads) for _ in range(n_layers))
        # Frozen target modules, held outside the module tree so checkpoints exclude them.
        object.__setattr__(self, "_target_embed", target.embed_tokens)
        object.__setattr__(self, "_target_head", target.lm_head)

    def embed(self, ids: torch.Tensor) -> torch.Tensor:
        return self._target_embed(ids).to(self.ctx_norm.dtype)

    def head(self, h: torch.Tensor) -> torch.Tensor:
        """(…, d) drafter hidden -> (…, V) logits through the target's frozen LM head."""
        w = self._target_head.weight
        return self._target_head(rms_norm(h, self.out_norm).to(w.dtype)).to(h.dtype)

    def context(self, feats: torch.Tensor) -> torch.Tensor:
        """(R, W, Df) target features -> H_ctx (R, W, d)."""
        return rms_norm(self.ctx_proj(feats.to(self.ctx_norm.dtype)), self.ctx_norm)


class ParallelDrafter(_Base):
    """DFlash-style parallel drafter (see the module docstring). Args: target, gamma, n_layers, n_heads, window."""

    family = "parallel"

    def __init__(self, target, gamma: int = 7, n_layers: int = 1, n_heads: int = 4, window: int = 32) -> None:
        super().__init__(target, gamma, n_layers, n_heads, window)
        self.mask_emb = nn.Parameter(torch.zeros(self.d))
        self.slot_emb = nn.Parameter(torch.zeros(gamma, self.d))

    def backbone(self, ctx: torch.Tensor, ctx_mask: torch.Tensor, anchor: torch.Tensor) -> torch.Tensor:
        """Context (R, W, Df), mask (R, W), anchors (R,) -> block hidden states h (R, gamma, d), one pass."""
        R = anchor.shape[0]
        x = self.mask_emb.expand(R, self.gamma, -1).clone()
        x[:, 0] = self.embed(anchor)
        x = x + self.slot_emb
        c = self.context(ctx)
        for layer in self.layers:
            x = layer(x, c, ctx_mask)
        return x

    def train_outputs(self, ctx, ctx_mask, anchor, teacher):
        """Logits (R, gamma, V) under teacher forcing (unused here) and no confidence logits."""
        return self.head(self.backbone(ctx, ctx_mask, anchor)), None

    @torch.no_grad()
    def propose(self, ctx, ctx_mask, anchor, temperature: float, greedy: bool, u: torch.Tensor) -> DraftBlock:
        logits = self.head(self.backbone(ctx, ctx_mask, anchor))          # (R, gamma, V)
        R, g, V = logits.shape
        tok, q = pick_tokens(logits.reshape(R * g, V), temperature, greedy, u.reshape(-1))
        tok, q = tok.view(R, g), q.view(R, g, V)
        return DraftBlock(tok, q, q.gather(2, tok[..., None]).squeeze(2))


class DSparkDrafter(ParallelDrafter):
    """DSpark semi-autoregressive drafter: parallel backbone + Markov head + confidence head.

    Args:
        target, gamma, n_layers, n_heads, window: as :class:`ParallelDrafter`.
        markov_rank: r, the rank of the low-rank bias W1[x_{k-1}] W2 (16 by default, see module docstring).
    """

    family = "semi-autoregressive"

    def __init__(self, target, gamma: int = 7, n_layers: int = 1, n_heads: int = 4, window: int = 32,
                 markov_rank: int = 16) -> None:
        super().__init__(target, gamma, n_layers, n_heads, window)
        self.config["markov_rank"] = markov_rank
        V = target.vocab_size
        self.w1 = nn.Embedding(V, markov_rank)
        nn.init.normal_(self.w1.weight, std=0.02)
        self.w2 = nn.Linear(markov_rank, V, bias=False)
        nn.init.zeros_(self.w2.weight)                      # start as the plain parallel drafter
        self.conf_head = nn.Linear(self.d + markov_rank, 1)

    def _markov(self, h: torch.Tensor, prev: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Bias logits (…, V) and confidence logits (…,) from h (…, d) and previous tokens (…)."""
        e = self.w1(prev)
        return self.w2(e), self.conf_head(torch.cat([h, e], dim=-1)).squeeze(-1)

    def train_outputs(self, ctx, ctx_mask, anchor, teacher):
        """Teacher-forced corrected logits (R, gamma, V) and confidence logits (R, gamma)."""
        h = self.backbone(ctx, ctx_mask, anchor)
        prev = torch.cat([anchor[:, None], teacher[:, :-1]], dim=1)     # x_0 = anchor, then ground truth
        bias, conf_logit = self._markov(h, prev)
        return self.head(h) + bias, conf_logit

    @torch.no_grad()
    def propose(self, ctx, ctx_mask, anchor, temperature: float, greedy: bool, u: torch.Tensor) -> DraftBlock:
        h = self.backbone(ctx, ctx_mask, anchor)                          # (R, gamma, d), one pass
        base = self.head(h)                                               # (R, gamma, V)
        toks, qs, confs, prev = [], [], [], anchor
        for k in range(self.gamma):                                       # the light sequential head
            bias, conf_logit = self._markov(h[:, k], prev)
            tok, q = pick_tokens(base[:, k] + bias, temperature, greedy, u[:, k])
            toks.append(tok), qs.append(q), confs.append(torch.sigmoid(conf_logit))
            prev = tok
        return DraftBlock(torch.stack(toks, 1), torch.stack(qs, 1), torch.stack(confs, 1))


class AutoregressiveDrafter(_Base):
    """EAGLE-style autoregressive drafter (see the module docstring). Args: target, gamma, n_layers, n_heads, window."""

    family = "autoregressive"

    def __init__(self, target, gamma: int = 7, n_layers: int = 1, n_heads: int = 4, window: int = 32) -> None:
        super().__init__(target, gamma, n_layers, n_heads, window)
        self.fc = nn.Linear(2 * self.d, self.d, bias=False)

    def _unroll(self, ctx, ctx_mask, anchor, next_token) -> tuple[torch.Tensor, list]:
        """Run gamma sequential steps; ``next_token(k, logits_k)`` returns x_k. Returns logits (R, gamma, V)."""
        c = self.context(ctx)                                             # (R, W, d)
        last = ctx_mask.long().cumsum(1).argmax(1)                        # index of the last valid position
        g = c[torch.arange(c.shape[0]), last]                             # (R, d) g_0
        prev, hs, logits, extra = anchor, [], [], []
        for k in range(self.gamma):
            x = self.fc(torch.cat([g, self.embed(prev)], dim=-1))[:, None]   # (R, 1, d)
            mem = torch.cat([c] + hs, dim=1) if hs else c
            mem_mask = torch.cat([ctx_mask, torch.ones(c.shape[0], len(hs), dtype=torch.bool,
                                                       device=c.device)], dim=1)
            for layer in self.layers:
                x = layer(x, mem, mem_mask)
            hs.append(x)
            g = x[:, 0]
            lg = self.head(g)                                             # (R, V)
            logits.append(lg)
            prev, info = next_token(k, lg)
            extra.append(info)
        return torch.stack(logits, 1), extra

    def train_outputs(self, ctx, ctx_mask, anchor, teacher):
        """Training-time-test unroll with teacher-forced tokens: logits (R, gamma, V), no confidence."""
        logits, _ = self._unroll(ctx, ctx_mask, anchor, lambda k, lg: (teacher[:, k], None))
        return logits, None

    @torch.no_grad()
    def propose(self, ctx, ctx_mask, anchor, temperature: float, greedy: bool, u: torch.Tensor) -> DraftBlock:
        def choose(k, lg):
            tok, q = pick_tokens(lg, temperature, greedy, u[:, k])
            return tok, (tok, q)
        _, extra = self._unroll(ctx, ctx_mask, anchor, choose)
        tok = torch.stack([e[0] for e in extra], 1)
        q = torch.stack([e[1] for e in extra], 1)
        return DraftBlock(tok, q, q.gather(2, tok[..., None]).squeeze(2))


class TableDrafter(nn.Module):
    """A fixed first-order drafter for exact tests: q(x_k | x_{k-1}) = table[x_{k-1}], x_0 = anchor, and
    confidences c_k = conf_table[k-1, x_{k-1}] (a Markov confidence, as DSpark's head: c_{k+1} depends on
    the drafted x_k, DSpark paper §3.2.1 and Appendix A).

    Args:
        table: (V, V) row-stochastic draft probabilities (zeros allowed: p_d = 0 where p_t > 0).
        conf_table: (gamma, V) confidences in [0, 1].
    """

    family = "table"

    def __init__(self, table, conf_table) -> None:
        super().__init__()
        self.register_buffer("table", torch.as_tensor(table, dtype=torch.float64))
        self.register_buffer("conf_table", torch.as_tensor(conf_table, dtype=torch.float64))
        self.gamma = int(self.conf_table.shape[0])
        self.window = 1
        self.config = dict(gamma=self.gamma)

    @torch.no_grad()
    def propose(self, ctx, ctx_mask, anchor, temperature: float, greedy: bool, u: torch.Tensor) -> DraftBlock:
        toks, qs, confs, prev = [], [], [], anchor
        for k in range(self.gamma):
            logits = torch.log(self.table[prev])
            tok, q = pick_tokens(logits, temperature, greedy, u[:, k])
            toks.append(tok), qs.append(q), confs.append(self.conf_table[k, prev])
            prev = tok
        return DraftBlock(torch.stack(toks, 1), torch.stack(qs, 1), torch.stack(confs, 1))


DRAFTERS = {"autoregressive": AutoregressiveDrafter, "parallel": ParallelDrafter,
            "semi-autoregressive": DSparkDrafter}
ALIASES = {"eagle": "autoregressive", "eagle3": "autoregressive", "dflash": "parallel",
           "dspark": "semi-autoregressive"}


def make_drafter(family: str, target, **kw) -> _Base:
    """Build an untrained drafter of ``family`` (or its alias eagle/dflash/dspark) for ``target``.

    Raises:
        ValueError: unknown family.
    """
    family = ALIASES.get(family, family)
    if family not in DRAFTERS:
        raise ValueError(f"drafter family: expected one of {sorted(DRAFTERS) + sorted(ALIASES)}, got {family!r}")
    return DRAFTERS[family](target, **kw)


def save_drafter(drafter: _Base, path, meta: dict | None = None, half: bool = False) -> None:
    """Write a drafter checkpoint (its own weights only; the target's embedding/head are not stored)."""
    state = {k: (v.half() if half and v.is_floating_point() else v) for k, v in drafter.state_dict().items()}
    torch.save({"family": drafter.family, "config": drafter.config, "state": state, "meta": meta or {}}, path)


def load_drafter(path, target, dtype: torch.dtype = torch.float32) -> _Base:
    """Read a checkpoint written by :func:`save_drafter` and attach it to ``target``.

    Raises:
        specsim.errors.SpecsimInputError: missing or malformed file, or a target mismatch.
    """
    from specsim.errors import SpecsimInputError
    what = "a drafter checkpoint for this target (written by specsim torch train)"
    ck = read_checkpoint(path, what)
    try:
        d = make_drafter(ck["family"], target, **ck["config"])
        d.load_state_dict({k: v.to(dtype) if v.is_floating_point() else v for k, v in ck["state"].items()})
    except (KeyError, TypeError, AttributeError, RuntimeError, ValueError) as e:
        raise SpecsimInputError(str(path), None, None, what, checkpoint_problem(e)) from None
    d.meta = ck.get("meta", {})
    return d.to(dtype).eval().requires_grad_(False)


def context_window(feats: list[torch.Tensor], window: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Left-pad the last ``window`` context features of each request.

    Args:
        feats: R tensors (n_r, Df), each request's features at positions before its anchor.
        window: W.

    Returns:
        ctx (R, W, Df) and ctx_mask (R, W) bool (True where a real position sits).
    """
    R, Df = len(feats), feats[0].shape[1]
    ctx = feats[0].new_zeros(R, window, Df)
    mask = torch.zeros(R, window, dtype=torch.bool)
    for r, f in enumerate(feats):
        f = f[-window:]
        n = f.shape[0]
        if n:
            ctx[r, window - n:] = f
            mask[r, window - n:] = True
    mask[:, -1] |= ~mask.any(1)      # an empty context still needs one key (a zero vector)
    return ctx, mask


__all__ = ["AutoregressiveDrafter", "DSparkDrafter", "DraftBlock", "FAMILIES", "ParallelDrafter", "TableDrafter",
           "context_window", "load_drafter", "make_drafter", "pick_tokens", "sample_inverse_cdf", "save_drafter"]
