"""Training: the from-scratch target, the target-feature cache, and drafter distillation.

Drafter loss (DSpark paper §3.3; DeepSpec's loss): per anchor, for draft positions k = 1..gamma with
weights w_k = exp(-(k-1)/gamma_w), gamma_w = 4.0 (DeepSpec's ``loss_decay_gamma``; the paper's text
writes gamma),

* L_ce = sum_k w_k (-log p_d,k(x*_k)) / sum_k w_k,
* L_tv = sum_k w_k ||p_d,k - p_t,k||_1 / sum_k w_k (full L1, not halved),
* L_conf = sum_k w_k BCE(c_k, c*_k) / sum_k w_k with c*_k = 1 - 0.5 ||p_d,k - p_t,k||_1 (no gradient,
  clamped to [0, 1]; only drafters with a confidence head),
* L = 0.1 L_ce + 0.9 L_tv + 1.0 L_conf.

The same loss trains all three drafters, so the comparison isolates the architecture (the paper's
DFlash baseline used CE only and EAGLE-3 its own 0.8^k weights; DSpark paper §4.1). Deviation from the paper:
x* are the real-text tokens (teacher forcing) rather than target-regenerated responses; p_t is the
target's distribution at the same real-text prefix. Anchors are drawn uniformly over valid positions.
The target is frozen; its per-position last hidden state and context features are computed once and
cached (DSpark paper §3.3, production trick (a): the LM head is re-applied at the sampled positions).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from specsim.backends.torch.corpus import load_documents, sample_chunks
from specsim.backends.torch.models import TinyCausalLM, TinyTarget

GAMMA_W = 4.0                       # DeepSpec loss_decay_gamma (DSpark paper §3.3)
LOSS_WEIGHTS = (0.1, 0.9, 1.0)      # CE, TV, confidence (DSpark paper §3.3)


def _progress(total: int, desc: str, enabled: bool):
    """A rich progress bar context (a no-op stand-in when disabled)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    class _Null:
        def __enter__(self):
            return self

        def __exit__(self, *a):
            return False

        def add_task(self, *a, **k):
            return 0

        def update(self, *a, **k):
            pass

    if not enabled:
        return _Null()
    return Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                    TextColumn("{task.fields[info]}"), TimeRemainingColumn(), transient=False)


def _cosine_lr(step: int, total: int, lr: float, warmup_frac: float = 0.04) -> float:
    """Warmup then cosine decay (DeepSpec: 4% warmup then cosine, DSpark paper §3.3)."""
    warm = max(1, int(total * warmup_frac))
    if step < warm:
        return lr * (step + 1) / warm
    return lr * 0.5 * (1 + math.cos(math.pi * (step - warm) / max(1, total - warm)))


def _torch_seed(seed: int, stream: int) -> int:
    return int(np.random.SeedSequence([seed, stream]).generate_state(1)[0])


# ------------------------------------------------------------------------------------ tiny target

def train_tiny_target(steps: int = 1500, seed: int = 0, batch: int = 24, seq_len: int = 96, lr: float = 3e-3,
                      progress: bool = True, **model_kw) -> tuple[TinyTarget, list[float]]:
    """Train the from-scratch character-level target on the real corpus (next-character CE).

    Returns:
        (target, losses): the trained target (eval mode, frozen) and the per-step training losses (nats/char).
    """
    torch.manual_seed(_torch_seed(seed, 1))
    model = TinyCausalLM(**model_kw)
    tgt = TinyTarget(model)
    docs = load_documents()
    chunks = sample_chunks(docs, steps * batch, seq_len + 1, seed, heldout=False)
    data = torch.tensor([tgt.encode(t) for _, t in chunks], dtype=torch.long)     # (steps*batch, seq_len+1)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    losses = []
    with _progress(steps, "target", progress) as bar:
        task = bar.add_task("train tiny target", total=steps, info="")
        for s in range(steps):
            x = data[s * batch:(s + 1) * batch]
            logits, _ = model(x[:, :-1])
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), x[:, 1:].reshape(-1))
            for grp in opt.param_groups:
                grp["lr"] = _cosine_lr(s, steps, lr)
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            losses.append(float(loss.detach()))
            bar.update(task, advance=1, info=f"loss {loss.item():.3f}")
    model.eval().requires_grad_(False)
    return tgt, losses


# ---------------------------------------------------------------------------------------- cache

@dataclass
class TargetCache:
    """The frozen target's outputs over training text.

    Attributes:
        ids: (N, L) token ids.
        last_hidden: (N, L, d) LM-head inputs (float16 to save memory).
        feats: (N, L, Df) context features (float16).
        domains: (N,) domain of each sequence.
    """

    ids: torch.Tensor
    last_hidden: torch.Tensor
    feats: torch.Tensor
    domains: list


def build_cache(target, num_seqs: int, seq_len: int, seed: int, heldout: bool = False, batch: int = 8,
                progress: bool = True, chars_per_token: float = 4.0) -> TargetCache:
    """Run the target once over ``num_seqs`` real-text sequences of ``seq_len`` tokens and cache its outputs.

    Args:
        chars_per_token: characters drawn per wanted token (text is tokenised then cut to ``seq_len``).
    """
    docs = load_documents()
    is_char = getattr(target, "name", "") == "tiny-char"
    n_chars = seq_len if is_char else int(seq_len * chars_per_token * 1.5)
    chunks = sample_chunks(docs, num_seqs, n_chars, seed, heldout=heldout)
    ids_l, doms = [], []
    for dom, text in chunks:
        t = target.encode(text)[:seq_len]
        if len(t) == seq_len:
            ids_l.append(t)
            doms.append(dom)
    ids = torch.tensor(ids_l, dtype=torch.long)
    hs, fs = [], []
    with _progress(len(ids), "cache", progress) as bar, torch.no_grad():
        task = bar.add_task("target features", total=len(ids), info="")
        for s in range(0, len(ids), batch):
            h, f = target.hidden(ids[s:s + batch])
            hs.append(h.half())
            fs.append(f.half())
            bar.update(task, advance=min(batch, len(ids) - s), info="")
    return TargetCache(ids, torch.cat(hs), torch.cat(fs), doms)


def sample_anchors(cache: TargetCache, num: int, gamma: int, window: int, rng: np.random.Generator):
    """Draw ``num`` (sequence, anchor position) pairs and assemble a training batch.

    Returns:
        ctx (num, W, Df) float32, ctx_mask (num, W), anchor (num,), teacher (num, gamma) real next tokens,
        hidden (num, gamma, d) the target's LM-head inputs at positions n..n+gamma-1 (they predict
        drafts 1..gamma).
    """
    N, L = cache.ids.shape
    seq = torch.from_numpy(rng.integers(0, N, num))
    n = torch.from_numpy(rng.integers(1, L - gamma, num))                   # anchor positions
    win = n[:, None] - window + torch.arange(window)[None, :]               # (num, W) context positions < n
    mask = win >= 0
    ctx = cache.feats[seq[:, None], win.clamp(min=0)].float() * mask[..., None]
    k = torch.arange(gamma)[None, :]
    teacher = cache.ids[seq[:, None], n[:, None] + 1 + k]                     # x*_k at n + k
    hidden = cache.last_hidden[seq[:, None], n[:, None] + k].float()         # predicts x*_k
    return ctx, mask, cache.ids[seq, n], teacher, hidden


def drafter_loss(drafter, target, ctx, mask, anchor, teacher, hidden) -> tuple[torch.Tensor, dict]:
    """The paper's loss 0.1 L_ce + 0.9 L_tv + 1.0 L_conf with exp(-(k-1)/4) position weights (module docstring).

    Returns:
        (loss, parts): the scalar loss and a dict of float components (ce, tv, conf, accept_est).
    """
    logits, conf_logit = drafter.train_outputs(ctx, mask, anchor, teacher)  # (B, g, V), (B, g) or None
    g = logits.shape[1]
    with torch.no_grad():
        p_t = torch.softmax(target.lm_head(hidden.to(target.lm_head.weight.dtype)).float(), dim=-1)
    logp_d = torch.log_softmax(logits.float(), dim=-1)
    p_d = logp_d.exp()
    w = torch.exp(-torch.arange(g, dtype=torch.float32) / GAMMA_W)          # w_k, k = 1..g
    wsum = w.sum()
    ce = -(logp_d.gather(2, teacher[..., None]).squeeze(2))                  # (B, g)
    l1 = (p_d - p_t).abs().sum(-1)                                           # (B, g) full L1
    L_ce = (ce.mean(0) * w).sum() / wsum
    L_tv = (l1.mean(0) * w).sum() / wsum
    a, b, c = LOSS_WEIGHTS
    loss = a * L_ce + b * L_tv
    parts = {"ce": float(L_ce.detach()), "tv": float(L_tv.detach()),
             "accept_est": float(1 - 0.5 * l1[:, 0].detach().mean())}
    if conf_logit is not None:
        c_star = (1 - 0.5 * l1.detach()).clamp(0, 1)
        bce = F.binary_cross_entropy_with_logits(conf_logit.float(), c_star, reduction="none")
        L_conf = (bce.mean(0) * w).sum() / wsum
        loss = loss + c * L_conf
        parts["conf"] = float(L_conf.detach())
    return loss, parts


def train_drafter(drafter, target, cache: TargetCache, steps: int = 300, batch: int = 32, lr: float = 2e-3,
                  seed: int = 0, progress: bool = True, desc: str = "drafter") -> list[dict]:
    """Distil ``drafter`` from the frozen target on cached real text (AdamW, warmup + cosine, clip 1.0).

    Returns:
        the per-step loss parts (dicts with loss, ce, tv, conf, accept_est).
    """
    torch.manual_seed(_torch_seed(seed, 2))
    rng = np.random.default_rng(np.random.SeedSequence([seed, 3]))
    params = [p for p in drafter.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.0)
    drafter.train()
    hist = []
    with _progress(steps, desc, progress) as bar:
        task = bar.add_task(f"train {desc}", total=steps, info="")
        for s in range(steps):
            ctx, mask, anchor, teacher, hidden = sample_anchors(cache, batch, drafter.gamma, drafter.window, rng)
            loss, parts = drafter_loss(drafter, target, ctx, mask, anchor, teacher, hidden)
            for grp in opt.param_groups:
                grp["lr"] = _cosine_lr(s, steps, lr)
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
            parts["loss"] = float(loss.detach())
            hist.append(parts)
            bar.update(task, advance=1, info=f"loss {parts['loss']:.3f} tv {parts['tv']:.3f}")
    drafter.eval().requires_grad_(False)
    return hist
