"""Lossless batched speculative decoding with real models under specsim's policy objects.

One engine step for the running requests (DSpark paper §2.1; DESIGN.md "a decode step"):

1. draft: the drafter proposes gamma tokens per request, with draft probabilities q and raw confidences;
2. schedule: a :class:`~specsim.policies.base.SchedulingView` (raw and calibrated confidences, request
   state, causal history, the step-time profile) goes to the policy, which returns verify lengths l_r;
   policies with ``capacity`` get the view of two steps earlier first (``base.py``). Lengths are checked
   (shape, integers in [0, gamma], else RuntimeError naming the policy) and clipped to the request's
   remaining output - 1, as the simulator's engine does;
3. verify: one batched target forward over every request's [context, anchor, l_r drafts];
4. accept (:func:`verify_block`): draft k is accepted with probability min(1, p_t(x_k) / p_d(x_k)),
   left to right; at the first rejection the correction is sampled from the normalised residual
   max(0, p_t - p_d); when all l_r drafts pass, a bonus token is sampled from p_t. Greedy mode accepts
   exact argmax matches and emits the target's argmax. The emitted tokens are accepted drafts + 1.

Numeric edges: p_d(x) = 0 where p_t(x) > 0 (acceptance is tested as u * p_d(x) < p_t(x), so no division;
the residual then carries that mass); an all-zero residual (p_t <= p_d everywhere, i.e. equal up to
rounding) falls back to p_t; EOS inside an accepted block ends the request right after the EOS; an
output budget reached mid-block truncates the emission (with the clip to remaining - 1 it never is).

Randomness: every request has its own numpy Generator from ``SeedSequence([seed, request index])``; each
step it draws the drafter's block of draft uniforms, gamma acceptance uniforms and one residual/bonus uniform.
Every step is logged in the step-log format of :mod:`specsim.acceptance.steplog` with wall-clock times.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import torch

from specsim.backends.torch.drafters import context_window, sample_inverse_cdf
from specsim.hardware.profile import StepTimeProfile
from specsim.policies.base import SchedulingView, as_policy


def verify_block(draft: torch.Tensor, q: torch.Tensor, p: torch.Tensor, verify_len: torch.Tensor,
                 greedy: bool, u_accept: torch.Tensor, u_next: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Rejection-sample one verified block per request (vectorised over requests).

    Args:
        draft: (R, gamma) drafted tokens.
        q: (R, gamma, V) draft probabilities of each position (softmax at the sampling temperature).
        p: (R, gamma + 1, V) target probabilities; row k predicts draft k+1, row l_r gives the bonus.
        verify_len: (R,) l_r in [0, gamma].
        greedy: accept exact argmax matches and emit argmaxes.
        u_accept: (R, gamma) uniforms in [0, 1) for the acceptance tests.
        u_next: (R,) uniforms for the correction / bonus sample.

    Returns:
        (num_accepted (R,), next_token (R,)): accepted drafts (0..l_r) and the target's own token.
    """
    R, g = draft.shape
    pos = torch.arange(g, device=draft.device)
    if greedy:
        ok = draft == p[:, :g].argmax(-1)                                  # (R, g)
    else:
        px = p[:, :g].gather(2, draft[..., None]).squeeze(2)              # p_t(x_k)
        qx = q.gather(2, draft[..., None]).squeeze(2)                     # p_d(x_k)
        ok = u_accept.to(p.dtype) * qx < px                               # u < p/q, safe at q = 0
    ok = ok & (pos[None, :] < verify_len[:, None])
    num_accepted = torch.cumprod(ok.long(), dim=1).sum(1)                 # (R,) first failure stops
    rows = torch.arange(R, device=draft.device)
    p_next = p[rows, num_accepted]                                        # (R, V)
    if greedy:
        return num_accepted, p_next.argmax(-1)
    rejected = num_accepted < verify_len
    q_next = q[rows, num_accepted.clamp(max=g - 1)] if g else torch.zeros_like(p_next)
    resid = (p_next - q_next).clamp_(min=0.0)
    has_mass = resid.sum(-1, keepdim=True) > 0
    resid = torch.where(has_mass, resid, p_next)                          # all-zero residual -> p_t
    dist = torch.where(rejected[:, None], resid, p_next)
    return num_accepted, sample_inverse_cdf(dist, u_next)


@dataclass
class _Request:
    index: int
    request_id: str
    domain: str
    prompt_len: int
    max_new_tokens: int
    ignore_eos: bool
    rng: np.random.Generator
    tokens: list = field(default_factory=list)
    feats: torch.Tensor | None = None        # (len(tokens) - 1, Df): every position before the anchor
    num_generated: int = 0
    done: bool = False
    verified: int = 0
    accepted: int = 0
    last_verify_len: int = -1
    last_accepted: int = -1
    finish_reason: str = ""


class SpecDecoder:
    """A batched speculative-decoding engine around a real target and drafter.

    Args:
        target: a target (see :mod:`specsim.backends.torch.models`).
        drafter: a drafter (see :mod:`specsim.backends.torch.drafters`) or None (only with policy ``none``).
        policy: a specsim policy (or a plain function view -> verify lengths).
        profile: the step-time profile the policy sees (measured on this machine, or given).
        gamma: drafts per request per step (a policy with a ``gamma`` attribute, e.g. mtp1, lowers it).
        greedy: greedy decoding (exact argmax matches) instead of sampling.
        temperature: sampling temperature T (> 0) when not greedy.
        seed: the run seed (per-request streams ``SeedSequence([seed, index])``).
        sts_temperatures: (gamma,) STS temperatures for the calibrated confidences, or None (conf = raw).
        clip_to_budget: clip l_r to remaining output - 1 (as the simulator engine does).
        max_batch: the most running requests per step (continuous batching admits FCFS).

    Raises:
        ValueError: a drafter is missing for a speculating policy, or gamma/temperature out of range.
    """

    def __init__(self, target, drafter, policy, profile: StepTimeProfile, gamma: int = 7, greedy: bool = True,
                 temperature: float = 1.0, seed: int = 0, sts_temperatures=None, clip_to_budget: bool = True,
                 max_batch: int = 64) -> None:
        self.policy = as_policy(policy)
        self.speculate = getattr(self.policy, "drafter", None) != "none"
        if self.speculate and drafter is None:
            raise ValueError(f"policy {self.policy.name!r} needs a drafter")
        if gamma < 1 or (drafter is not None and gamma > drafter.gamma):
            raise ValueError(f"gamma: expected 1..{getattr(drafter, 'gamma', gamma)}, got {gamma}")
        if not greedy and not temperature > 0:
            raise ValueError(f"temperature: expected > 0, got {temperature}")
        self.target, self.drafter, self.profile = target, drafter, profile
        forced_gamma = getattr(self.policy, "gamma", None)      # mtp1 forces 1; PolicyBase's default is None
        self.gamma = gamma if forced_gamma is None else min(gamma, int(forced_gamma))
        self.greedy, self.temperature, self.seed = greedy, float(temperature), seed
        self.sts = None if sts_temperatures is None else np.asarray(sts_temperatures, dtype=float)
        self.clip_to_budget, self.max_batch = clip_to_budget, max_batch
        self.requests: list[_Request] = []
        self.pending: deque[_Request] = deque()
        self.running: list[_Request] = []
        self.step_index = 0
        self.clock0 = time.perf_counter()
        self.rows: list[dict] = []
        self.emissions: list[tuple[str, int, list[int]]] = []   # (request_id, step, tokens emitted)
        self.num_clipped = 0
        self._views: deque = deque(maxlen=2)                    # the last two steps' views (for capacity)

    # ------------------------------------------------------------------------------ requests
    def add_request(self, prompt_ids, max_new_tokens: int, request_id: str | None = None, domain: str = "chat",
                    ignore_eos: bool = False) -> str:
        """Queue a request; it is prefilled at the next step. Returns its id.

        Raises:
            ValueError: an empty prompt or ``max_new_tokens`` < 1.
        """
        if len(prompt_ids) < 1 or max_new_tokens < 1:
            raise ValueError("add_request: expected a non-empty prompt and max_new_tokens >= 1")
        i = len(self.requests)
        req = _Request(i, str(i if request_id is None else request_id), domain, len(prompt_ids), int(max_new_tokens),
                       ignore_eos, np.random.default_rng(np.random.SeedSequence([self.seed, i])),
                       tokens=[int(t) for t in prompt_ids])
        self.requests.append(req)
        self.pending.append(req)
        return req.request_id

    @property
    def has_work(self) -> bool:
        """True while a request is pending or running."""
        return bool(self.pending or self.running)

    def outputs(self) -> dict[str, list[int]]:
        """Generated tokens per request id (the prompt excluded)."""
        return {r.request_id: r.tokens[r.prompt_len:] for r in self.requests}

    # ------------------------------------------------------------------------------ engine
    def _forward(self, seqs: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
        """Right-padded batched target forward: logits (R, L, V) float64 and features (R, L, Df)."""
        L = max(len(s) for s in seqs)
        ids = torch.zeros(len(seqs), L, dtype=torch.long)
        for r, s in enumerate(seqs):
            ids[r, :len(s)] = torch.tensor(s)
        with torch.no_grad():
            logits, feats = self.target(ids)
        return logits.to(torch.float64), feats

    def _probs(self, logits: torch.Tensor) -> torch.Tensor:
        return torch.softmax(logits / (1.0 if self.greedy else self.temperature), dim=-1)

    def _emit(self, req: _Request, new: list[int], step: int) -> None:
        """Append emitted tokens, ending the request at EOS (unless ignored) or at its output budget."""
        eos = self.target.eos_id
        if eos is not None and not req.ignore_eos and eos in new:
            new = new[:new.index(eos) + 1]
            req.done, req.finish_reason = True, "eos"
        remaining = req.max_new_tokens - req.num_generated
        if len(new) >= remaining:
            new = new[:remaining]
            req.done, req.finish_reason = True, req.finish_reason or "length"
        req.tokens.extend(new)
        req.num_generated += len(new)
        self.emissions.append((req.request_id, step, list(new)))

    def _prefill(self) -> None:
        """Admit pending requests (FCFS, up to ``max_batch`` running) and emit each one's first token."""
        admit = []
        while self.pending and len(self.running) + len(admit) < self.max_batch:
            admit.append(self.pending.popleft())
        if not admit:
            return
        logits, feats = self._forward([r.tokens for r in admit])
        u = torch.tensor([r.rng.random() for r in admit])
        last = torch.tensor([r.prompt_len - 1 for r in admit])
        p = self._probs(logits[torch.arange(len(admit)), last])              # (n, V)
        first = p.argmax(-1) if self.greedy else sample_inverse_cdf(p, u)
        for i, r in enumerate(admit):
            r.feats = feats[i, :r.prompt_len]
            self._emit(r, [int(first[i])], -1)
            if not r.done:
                self.running.append(r)

    def _view(self, reqs: list[_Request], conf_raw: np.ndarray, now_s: float, capacity) -> SchedulingView:
        conf = conf_raw if self.sts is None else _apply_sts(conf_raw, self.sts)
        i64 = lambda xs: np.array(xs, dtype=np.int64)  # noqa: E731
        return SchedulingView(
            step=self.step_index, now_s=now_s, gamma=self.gamma,
            request_ids=i64([r.index for r in reqs]), domains=np.array([r.domain for r in reqs], dtype=object),
            conf_raw=conf_raw, conf=conf, num_generated=i64([r.num_generated for r in reqs]),
            prompt_tokens=i64([r.prompt_len for r in reqs]), kv_tokens=float(sum(len(r.tokens) for r in reqs)),
            hist_drafts_verified=i64([r.verified for r in reqs]), hist_drafts_accepted=i64([r.accepted for r in reqs]),
            last_verify_len=i64([r.last_verify_len for r in reqs]), last_accepted=i64([r.last_accepted for r in reqs]),
            profile=self.profile, capacity=capacity)

    def _schedule(self, reqs: list[_Request], conf_raw: np.ndarray, now_s: float) -> np.ndarray:
        """Build the view (with capacity from two steps earlier when the policy has one) and check the result."""
        capacity = None
        if callable(getattr(self.policy, "capacity", None)):      # None = not used (PolicyBase)
            old = self._views[0] if len(self._views) == 2 else None
            ids = np.array([r.index for r in reqs], dtype=np.int64)
            capacity = int(self.policy.capacity(old, ids, len(reqs)))
        view = self._view(reqs, conf_raw, now_s, capacity)
        self._views.append(view)
        out = np.asarray(self.policy(view))
        if out.shape != (len(reqs),) or not np.issubdtype(out.dtype, np.integer) or \
                (out.size and (out.min() < 0 or out.max() > self.gamma)):
            raise RuntimeError(f"policy {self.policy.name!r} returned {out!r}: expected ({len(reqs)},) "
                               f"integers in [0, {self.gamma}]")
        verify_len = out.astype(np.int64)
        if self.clip_to_budget:
            cap = np.array([r.max_new_tokens - r.num_generated - 1 for r in reqs])
            self.num_clipped += int(np.sum(verify_len > cap))
            verify_len = np.minimum(verify_len, cap)
        return verify_len

    def step(self) -> None:
        """One engine step: prefill newcomers, then draft, schedule, verify and accept for the running ones."""
        t_start = time.perf_counter()
        self._prefill()
        reqs = [r for r in self.running if not r.done]
        self.running = reqs
        if not reqs:
            return
        R, g = len(reqs), self.gamma
        dg = self.drafter.gamma if self.speculate else g                      # the drafter drafts its full block
        u = np.stack([r.rng.random(dg + g + 1) for r in reqs])                # (R, dg + g + 1)
        u_draft, u_acc, u_next = (torch.from_numpy(x) for x in (u[:, :dg], u[:, dg:dg + g], u[:, dg + g]))
        anchor = torch.tensor([r.tokens[-1] for r in reqs])
        if self.speculate:
            ctx, mask = context_window([r.feats for r in reqs], self.drafter.window)
            block = self.drafter.propose(ctx, mask, anchor, self.temperature, self.greedy, u_draft)
            draft, q = block.tokens[:, :g], block.q[:, :g].to(torch.float64)
            conf_raw = block.conf_raw[:, :g].double().numpy()
        else:
            draft = torch.zeros(R, g, dtype=torch.long)
            q = torch.zeros(R, g, self.target.vocab_size, dtype=torch.float64)
            conf_raw = np.zeros((R, g))
        t_draft = time.perf_counter()
        verify_len = self._schedule(reqs, conf_raw, t_start - self.clock0)
        lengths = [len(r.tokens) for r in reqs]
        logits, feats = self._forward([r.tokens + draft[i, :verify_len[i]].tolist() for i, r in enumerate(reqs)])
        idx = torch.tensor(lengths)[:, None] - 1 + torch.arange(g + 1)[None, :]            # (R, g+1)
        idx = idx.clamp(max=logits.shape[1] - 1)
        p = self._probs(logits[torch.arange(R)[:, None], idx])                             # (R, g+1, V)
        num_acc, nxt = verify_block(draft, q, p, torch.from_numpy(verify_len), self.greedy, u_acc, u_next)
        t_end = time.perf_counter()
        for i, r in enumerate(reqs):
            a = int(num_acc[i])
            r.feats = feats[i, :lengths[i] + a]                       # anchor + accepted drafts now have features
            self._emit(r, draft[i, :a].tolist() + [int(nxt[i])], self.step_index)
            r.verified += int(verify_len[i])
            r.accepted += a
            r.last_verify_len, r.last_accepted = int(verify_len[i]), a
            self.rows.append({
                "step": self.step_index, "replica": 0, "time_s": t_start - self.clock0, "step_time_s": t_end - t_start,
                "request_id": r.request_id, "domain": r.domain, "gamma": g, "verify_len": int(verify_len[i]),
                "num_accepted": a, "conf_raw": conf_raw[i].tolist(), "conf": self._views[-1].conf[i].tolist(),
                "draft_time_s": t_draft - t_start, "batch_tokens": int(R + verify_len.sum())})
        self.running = [r for r in reqs if not r.done]
        self.step_index += 1

    def run(self, max_steps: int = 100_000) -> None:
        """Step until no request is pending or running.

        Raises:
            RuntimeError: ``max_steps`` steps passed with work left (a stuck engine).
        """
        for _ in range(max_steps):
            if not self.has_work:
                return
            self.step()
        if self.has_work:
            raise RuntimeError(f"decoder still has work after {max_steps} steps")

    def step_log(self) -> pd.DataFrame:
        """The step log (specsim.acceptance.steplog columns, plus draft_time_s and batch_tokens)."""
        cols = ["step", "replica", "time_s", "step_time_s", "request_id", "domain", "gamma", "verify_len",
                "num_accepted", "conf_raw", "conf", "draft_time_s", "batch_tokens"]
        df = pd.DataFrame(self.rows, columns=cols)
        df["request_id"] = df["request_id"].astype("string")
        df["domain"] = df["domain"].astype("string")
        return df


def _apply_sts(conf_raw: np.ndarray, temps: np.ndarray) -> np.ndarray:
    from specsim.acceptance.calibration import apply_temperatures
    return apply_temperatures(conf_raw, temps)


def greedy_reference(target, prompts: list[list[int]], max_new_tokens: int, stop_at_eos: bool = True
                     ) -> list[list[int]]:
    """Plain greedy decoding with the target alone (one token per forward), for equality tests.

    Args:
        target: a target; prompts: token-id lists; max_new_tokens: output budget per request.

    Returns:
        the generated tokens of each prompt (ends after EOS when ``stop_at_eos``).
    """
    seqs = [list(p) for p in prompts]
    outs: list[list[int]] = [[] for _ in prompts]
    live = list(range(len(prompts)))
    for _ in range(max_new_tokens):
        if not live:
            break
        L = max(len(seqs[i]) for i in live)
        ids = torch.zeros(len(live), L, dtype=torch.long)
        for j, i in enumerate(live):
            ids[j, :len(seqs[i])] = torch.tensor(seqs[i])
        with torch.no_grad():
            logits, _ = target(ids)
        last = torch.tensor([len(seqs[i]) - 1 for i in live])
        nxt = logits.to(torch.float64)[torch.arange(len(live)), last].argmax(-1)
        keep = []
        for j, i in enumerate(live):
            t = int(nxt[j])
            seqs[i].append(t)
            outs[i].append(t)
            if not (stop_at_eos and target.eos_id is not None and t == target.eos_id):
                keep.append(i)
        live = keep
    return outs
