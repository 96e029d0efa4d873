"""The model's context window (max model length): where it comes from, and which requests exceed it.

A request needs ``prompt_tokens + output_tokens`` positions of the target's context; vLLM refuses a request
whose prompt plus requested output exceeds ``--max-model-len`` (default: the model config's
``max_position_embeddings``). specsim does the same (issue 24 item 6):

* the context length, first that applies: ``engine.max_model_len`` (the scenario key; ``specsim run
  --max-model-len`` sets it, as vLLM's flag overrides the config), the profile metadata's ``max_model_len``,
  its step model's ``max_position_embeddings`` (read from config.json), the context length of the model its
  metadata names (:data:`specsim.hardware.model_config.CONTEXT_LENGTHS`: the bundled measured tables, Vidur's
  Llama-2 profiles at 4,096 tokens and splitwise-sim's); None when none is known (no limit);
* a request beyond it is unservable, with the reason, at arrival (``engine.context_overflow = "unservable"``,
  the default: a Llama-2-7B server refuses it) or, with ``"truncate"``, its output is cut to
  ``max_model_len - prompt_tokens`` tokens, as replay tools cap a request's output to the model's window; a
  prompt that fills the window by itself stays unservable (nothing of it could be cut without changing it);
* the run reports how many exceed the window and what became of them: ``summary["context_window"]``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from specsim.hardware.model_config import CONTEXT_LENGTHS

#: What a request beyond the context window becomes (``engine.context_overflow``).
CONTEXT_OVERFLOW = ("unservable", "truncate")


@dataclass(frozen=True)
class ContextWindow:
    """A run's context length and where it came from.

    Attributes:
        max_model_len: tokens of context (prompt + output) a request may use; None = unknown, no limit.
        source: where the value came from, in words.
        overflow: ``unservable`` or ``truncate`` (module docstring).
        model_window: the model's own window (tokens) and its source when ``engine.max_model_len`` sets a
            longer one, else None: vLLM refuses a ``--max-model-len`` above the model's
            ``max_position_embeddings`` unless ``VLLM_ALLOW_LONG_MAX_MODEL_LEN=1`` (vLLM's
            ``_get_and_verify_max_len``), and the model's outputs past its window are not what it was trained for.
    """

    max_model_len: int | None
    source: str
    overflow: str = "unservable"
    model_window: tuple[int, str] | None = None

    def over(self, prompt: np.ndarray, output: np.ndarray) -> np.ndarray:
        """(N,) bool: requests whose prompt + output tokens exceed the window."""
        if self.max_model_len is None:
            return np.zeros(np.shape(prompt), bool)
        return np.asarray(prompt) + np.asarray(output) > self.max_model_len

    def truncated_output(self, prompt: np.ndarray, output: np.ndarray) -> np.ndarray:
        """(N,) output tokens after truncation: ``min(output, max_model_len - prompt)`` where that leaves at least
        one token, else unchanged (such a prompt stays unservable)."""
        if self.max_model_len is None or self.overflow != "truncate":
            return np.asarray(output)
        room = self.max_model_len - np.asarray(prompt)
        return np.where(room >= 1, np.minimum(output, room), output)

    def reason(self, prompt: int, output: int) -> str:
        """The unservable reason of one request beyond the window."""
        return (f"prompt + output = {prompt + output} tokens > max_model_len {self.max_model_len} "
                f"(the model's context window, {self.source})")


def context_window(profile, override: int | None = None, overflow: str = "unservable") -> ContextWindow:
    """The run's :class:`ContextWindow` (precedence in the module docstring).

    Args:
        profile: the run's :class:`~specsim.hardware.profile.StepTimeProfile`.
        override: ``engine.max_model_len`` (tokens, >= 1) or None.
        overflow: ``engine.context_overflow``.
    """
    if override is not None:
        own = context_window(profile, None, overflow)
        longer = own.max_model_len is not None and int(override) > own.max_model_len
        return ContextWindow(int(override), "engine.max_model_len", overflow,
                             (own.max_model_len, own.source) if longer else None)
    from specsim.hardware.stepmodel import step_model_of

    md = profile.metadata or {}
    if md.get("max_model_len"):
        return ContextWindow(int(md["max_model_len"]), f"max_model_len of profile {profile.source}", overflow)
    sm = step_model_of(profile)
    if sm is not None and getattr(sm.model, "max_position_embeddings", 0):
        return ContextWindow(int(sm.model.max_position_embeddings), f"max_position_embeddings of {sm.model.name}",
                             overflow)
    name = str(md.get("model", "")).lower()
    if name in CONTEXT_LENGTHS:
        return ContextWindow(CONTEXT_LENGTHS[name], f"max_position_embeddings of {md['model']}'s config.json",
                             overflow)
    return ContextWindow(None, "unknown (no limit)", overflow)
