"""ShareGPT-style conversation files -> multi-turn session traces (``specsim trace convert --from sharegpt``).

Input: a JSON list, or JSON Lines, of conversations as the ShareGPT dumps that ``vllm bench serve --dataset-name
sharegpt`` reads hold them: ``{"id": ..., "conversations": [{"from": "human", "value": "..."}, {"from": "gpt",
"value": "..."}, ...]}``; OpenAI-style ``"messages": [{"role": "user", "content": "..."}, ...]`` is read too.
Roles ``human``/``user`` are the user's; ``gpt``/``assistant``/``chatgpt``/``bard``/``model`` the model's;
``system`` text opens the first prompt. Each (user message, model reply) pair is one **turn**; a trailing user
message without a reply is dropped; a conversation without a complete turn is skipped (counted).

Token lengths: with ``tokenizer`` naming a Hugging Face tokenizer and ``transformers`` installed, its token
counts (no special tokens); otherwise ``ceil(characters / chars_per_token)`` with :data:`CHARS_PER_TOKEN` = 4,
OpenAI's rule of thumb for English text ("one token generally corresponds to ~4 characters of text",
https://help.openai.com/en/articles/4936856-what-are-tokens-and-how-to-count-them). The result says which.

Turn k of a session: prompt = the whole previous context (every earlier user message and reply) + user message
k; output = reply k (at least 1 token). Sessions start at a renewal process of ``rate`` sessions/s (Poisson by
default); turn 0 arrives at its session's start, turn k >= 1 ``think_s`` after turn k-1 completes (the cluster
issues it, :mod:`specsim.engine.sessions`), with think times drawn from a distribution the user names
(:func:`parse_think`). Prefix cache: every turn carries ``hash_ids`` over ``hash_block_tokens``-token blocks of the
conversation (block j of session s has id s * 2^20 + j; the conversation only grows, so a full block's content
never changes), so turn k's leading blocks are exactly turn k-1's whole context.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from specsim.errors import SpecsimInputError
from specsim.jsonfiles import json_document, json_lines, read_text
from specsim.workload.trace import Trace

#: Characters per token when no tokenizer is available (OpenAI's English rule of thumb, module docstring).
CHARS_PER_TOKEN = 4.0
USER_ROLES = ("human", "user")
MODEL_ROLES = ("gpt", "assistant", "chatgpt", "bard", "model")
_BLOCK_IDS = 1 << 20                  # hash ids per session: block j of session s is s * 2^20 + j


def parse_think(spec: str) -> tuple[str, tuple[float, ...]]:
    """A think-time distribution: ``const:S``, ``exp:MEAN``, ``uniform:LO:HI`` or ``lognormal:MEDIAN:SIGMA`` (s).

    Raises:
        SpecsimInputError: an unknown kind, a wrong number of values, or a value < 0 (LO > HI, MEAN or MEDIAN <= 0
            where they must be positive).
    """
    kind, *vals = str(spec).split(":")
    arity = {"const": 1, "exp": 1, "uniform": 2, "lognormal": 2}
    try:
        nums = tuple(float(v) for v in vals)
    except ValueError:
        nums = ()
    ok = kind in arity and len(nums) == arity[kind] and all(np.isfinite(nums)) and all(x >= 0 for x in nums)
    ok = ok and (kind != "uniform" or nums[0] <= nums[1]) and (kind not in ("exp", "lognormal") or nums[0] > 0)
    if not ok:
        raise SpecsimInputError("--think", None, "think", "const:S, exp:MEAN, uniform:LO:HI or lognormal:MEDIAN:"
                                "SIGMA (seconds >= 0)", repr(spec))
    return kind, nums


def draw_think(rng: np.random.Generator, spec: tuple[str, tuple[float, ...]], n: int) -> np.ndarray:
    """(n,) think times in seconds from a :func:`parse_think` distribution."""
    kind, v = spec
    if kind == "const":
        return np.full(n, v[0])
    if kind == "exp":
        return rng.exponential(v[0], n)
    if kind == "uniform":
        return rng.uniform(v[0], v[1], n)
    return v[0] * np.exp(v[1] * rng.standard_normal(n))


def token_counter(tokenizer: str | None, chars_per_token: float = CHARS_PER_TOKEN):
    """(count(text) -> tokens >= 0, description): the named tokenizer when it loads, else the character rule.

    Raises:
        SpecsimInputError: ``chars_per_token`` <= 0, or a named tokenizer that ``transformers`` cannot load.
    """
    if not (np.isfinite(chars_per_token) and chars_per_token > 0):
        raise SpecsimInputError("--chars-per-token", None, "chars_per_token", "a number > 0", str(chars_per_token))
    rule = (lambda text: math.ceil(len(text) / chars_per_token),
            f"ceil(characters / {chars_per_token:g}) (no tokenizer)")
    if not tokenizer:
        return rule
    try:
        from transformers import AutoTokenizer
    except ImportError:
        return rule[0], f"ceil(characters / {chars_per_token:g}) (transformers is not installed for {tokenizer})"
    try:
        tok = AutoTokenizer.from_pretrained(tokenizer)
    except Exception as e:            # noqa: BLE001 - any load failure is the user's input problem
        raise SpecsimInputError("--tokenizer", None, "tokenizer", "a tokenizer transformers can load",
                                f"{tokenizer}: {type(e).__name__}") from None
    return (lambda text: len(tok(text, add_special_tokens=False).input_ids)), f"tokenizer {tokenizer}"


@dataclass(frozen=True)
class Conversation:
    """One conversation's turns in tokens: system prompt, then (user, reply) pairs."""

    cid: str
    system: int
    turns: tuple[tuple[int, int], ...]


def _messages(obj, src: str, line: int) -> list[tuple[str, str]]:
    msgs = obj.get("conversations", obj.get("messages")) if isinstance(obj, dict) else None
    if not isinstance(msgs, list):
        raise SpecsimInputError(src, line, "conversations", "a list of messages (ShareGPT 'conversations' with "
                                "from/value, or 'messages' with role/content)", repr(msgs)[:40])
    out = []
    for m in msgs:
        role = m.get("from", m.get("role")) if isinstance(m, dict) else None
        text = m.get("value", m.get("content")) if isinstance(m, dict) else None
        if not isinstance(role, str) or not isinstance(text, str):
            raise SpecsimInputError(src, line, "conversations", "messages with a role ('from' or 'role') and text "
                                    "('value' or 'content')", repr(m)[:60])
        out.append((role.lower(), text))
    return out


def _turns(msgs: list[tuple[str, str]], count) -> tuple[int, list[tuple[int, int]]]:
    """(system tokens, [(user tokens, reply tokens)]) of one conversation; unmatched messages fold into context."""
    system, turns, pending = 0, [], None
    for role, text in msgs:
        n = count(text)
        if role == "system" and not turns and pending is None:
            system += n
        elif role in USER_ROLES:
            pending = n if pending is None else pending + n        # two user messages in a row: one turn
        elif role in MODEL_ROLES and pending is not None:
            turns.append((pending, max(1, n)))
            pending = None
    return system, turns


def read_conversations(path: str | Path, count) -> tuple[list[Conversation], int]:
    """The conversations of a ShareGPT-style file (module docstring) and how many were skipped (no full turn)."""
    src = str(path)
    text = read_text(path)
    if text.lstrip().startswith("["):
        rows = list(enumerate(json_document(text, src, "a JSON list of conversations"), start=1))
    else:
        rows = json_lines(text, src, "one JSON conversation per line")
    convs, skipped = [], 0
    for ln, obj in rows:
        system, turns = _turns(_messages(obj, src, ln), count)
        if not turns:
            skipped += 1
            continue
        convs.append(Conversation(str(obj.get("id", f"conv{ln}")), system, tuple(turns)))
    if not convs:
        raise SpecsimInputError(src, None, "conversations", "at least one conversation with a user message and a "
                                "reply", f"none ({skipped} skipped)")
    return convs, skipped


def session_trace(convs: list[Conversation], *, rate: float, think=("const", (0.0,)), arrival: str = "poisson",
                  seed: int = 0, domain: str = "chat", hash_block_tokens: int = 16, max_turns: int | None = None,
                  source: str = "conversations") -> Trace:
    """A session trace of ``convs`` (module docstring): sessions at ``rate``/s, turns chained with think times.

    Raises:
        SpecsimInputError: ``rate`` <= 0, ``hash_block_tokens`` < 1 or ``max_turns`` < 1.
    """
    if not (np.isfinite(rate) and rate > 0) or hash_block_tokens < 1 or (max_turns is not None and max_turns < 1):
        raise SpecsimInputError(source, None, "rate", "rate > 0 sessions/s, hash_block_tokens >= 1, max_turns >= 1",
                                f"{rate}, {hash_block_tokens}, {max_turns}")
    rng = np.random.default_rng(np.random.SeedSequence([seed, 5]))
    gaps = rng.exponential(1.0 / rate, len(convs)) if arrival == "poisson" else np.full(len(convs), 1.0 / rate)
    starts = np.round(np.r_[0.0, np.cumsum(gaps[:-1])], 6)
    cols: dict[str, list] = {k: [] for k in ("request_id", "arrival_s", "prompt_tokens", "output_tokens",
                                             "hash_ids", "session_id", "turn", "think_s")}
    for s, (conv, t0) in enumerate(zip(convs, starts)):
        turns = conv.turns[:max_turns]
        thinks = draw_think(rng, think, len(turns))
        context = conv.system
        for k, (user, reply) in enumerate(turns):
            prompt = max(1, context + user)
            n_ids = -(-prompt // hash_block_tokens)
            cols["request_id"].append(f"{conv.cid}-{k}" if len(turns) > 1 else conv.cid)
            cols["arrival_s"].append(float(t0))
            cols["prompt_tokens"].append(prompt)
            cols["output_tokens"].append(reply)
            cols["hash_ids"].append(tuple(s * _BLOCK_IDS + j for j in range(n_ids)))
            cols["session_id"].append(f"s{s}")
            cols["turn"].append(k)
            cols["think_s"].append(0.0 if k == 0 else float(np.round(thinks[k], 6)))
            context = prompt + reply
    n = len(cols["arrival_s"])
    return Trace(_unique(cols["request_id"]), cols["arrival_s"], cols["prompt_tokens"], cols["output_tokens"],
                 [domain] * n, source=source, hash_ids=tuple(cols["hash_ids"]),
                 hash_block_tokens=np.full(n, hash_block_tokens, np.int64),
                 extra={k: cols[k] for k in ("session_id", "turn", "think_s")})


def _unique(ids: list[str]) -> list[str]:
    """Request ids made unique by a ``#k`` suffix (ShareGPT ids repeat across dumps)."""
    seen: dict[str, int] = {}
    out = []
    for i in ids:
        k = seen.get(i, 0)
        seen[i] = k + 1
        out.append(i if k == 0 else f"{i}#{k}")
    return out


def synthetic_conversations(num_sessions: int, turns: int, seed: int = 0, **lengths) -> list[Conversation]:
    """``num_sessions`` conversations of ``turns`` turns whose user messages and replies take the prompt and output
    lengths :func:`specsim.workload.trace.synth_trace` draws (``lengths``: its mix, max_*_tokens, output_len,
    prompt_len keywords), in session order (``trace synth --sessions``).

    Raises:
        SpecsimInputError: ``num_sessions`` or ``turns`` < 1.
    """
    from specsim.workload.synth import MAX_SYNTH_REQUESTS, synth_trace

    if num_sessions < 1 or turns < 1 or num_sessions * turns > MAX_SYNTH_REQUESTS:
        raise SpecsimInputError("--sessions", None, "sessions", "num_sessions >= 1 and turns >= 1, at most "
                                f"{MAX_SYNTH_REQUESTS:,} requests in all (MAX_SYNTH_REQUESTS)",
                                f"{num_sessions} sessions x {turns} turns")
    base = synth_trace(num_sessions * turns, rate=1.0, seed=seed, **lengths)
    p, o = base.prompt_tokens.reshape(num_sessions, turns), base.output_tokens.reshape(num_sessions, turns)
    return [Conversation(f"s{s}", 0, tuple(zip(p[s].tolist(), o[s].tolist()))) for s in range(num_sessions)]
