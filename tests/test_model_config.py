"""ModelConfig and the Hugging Face config.json reader: parameter counts against published totals, KV bytes,
per-GPU weight bytes under TP/EP, and input errors.

The configs in tests/data/hf_configs are typed from the public config.json of (Hugging Face repo ids):
meta-llama/Llama-3.1-8B, meta-llama/Llama-3.1-70B, Qwen/Qwen3-8B, Qwen/Qwen3-30B-A3B,
mistralai/Mixtral-8x7B-v0.1 and deepseek-ai/DeepSeek-V3 (only the keys specsim reads, plus model_type and
architectures).
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from specsim.errors import SpecsimInputError
from specsim.hardware import analytic
from specsim.hardware.model_config import BYTES_PER_DTYPE, MODELS, ModelConfig, model_from_hf_config

HF = Path(__file__).parent / "data" / "hf_configs"


def load(name: str, **kw) -> ModelConfig:
    return model_from_hf_config(HF / f"{name}.json", **kw)


# Published totals (model cards / reports): (total B, active B or None).
PUBLISHED = {
    "llama-3.1-8b": (8.03, None),        # Llama 3.1 model card: 8.03B
    "llama-3.1-70b": (70.6, None),       # Llama 3.1 model card: 70.6B
    "qwen3-8b": (8.2, None),             # Qwen3-8B model card: 8.2B
    "qwen3-30b-a3b": (30.5, 3.3),        # Qwen3-30B-A3B model card: 30.5B total, 3.3B activated
    "mixtral-8x7b": (46.7, 12.9),        # Mixtral of Experts (Jiang et al. 2024): 46.7B, 12.9B active
    "deepseek-v3": (671.0, 37.0),        # DeepSeek-V3 report: 671B total, 37B activated (MTP module excluded)
}


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_parameter_counts_match_published_totals(name):
    cfg = load(name)
    total, active = PUBLISHED[name]
    assert cfg.total_params() / 1e9 == pytest.approx(total, rel=0.02)
    if active is None:
        assert cfg.active_params_per_token() == cfg.total_params()
    else:
        assert cfg.active_params_per_token() / 1e9 == pytest.approx(active, rel=0.03)


def test_llama_8b_parsed_shape_and_kv_bytes():
    cfg = load("llama-3.1-8b")
    assert (cfg.num_layers, cfg.hidden, cfg.num_heads, cfg.num_kv_heads, cfg.head_dim, cfg.ffn, cfg.vocab) == (
        32, 4096, 32, 8, 128, 14336, 128256)
    assert cfg.name == "llama-3.1-8b" and cfg.weight_dtype == "bf16" and not cfg.tie_embeddings
    assert cfg.kv_bytes_per_token(1) == 131072           # 2 x 32 layers x 8 heads x 128 x 2 bytes
    assert cfg.kv_bytes_per_token(2) == 65536            # 4 KV heads per shard
    assert cfg.kv_bytes_per_token(16) == 16384           # KV heads replicated: one per shard
    assert load("llama-3.1-8b", kv_dtype="fp8").kv_bytes_per_token(1) == 65536


def test_weight_bytes_dense_closed_form():
    cfg = load("llama-3.1-8b")
    h, f, v, layers = 4096, 14336, 128256, 32
    norms = layers * 2 * h + h
    attn = layers * (h * (4096 + 2 * 1024) + h * 4096)
    assert cfg.total_params() == attn + layers * 3 * h * f + 2 * v * h + norms
    assert cfg.weight_bytes(1) == 2 * cfg.total_params()
    tp2_attn = layers * (h * (2048 + 2 * 512) + h * 2048)
    assert cfg.weight_bytes(2) == pytest.approx(2 * (tp2_attn + layers * 3 * h * f / 2 + v * h + norms))
    fp8 = load("llama-3.1-8b", weight_dtype="fp8")
    assert fp8.weight_bytes(1) == attn + layers * 3 * h * f + 2 * (2 * v * h + norms)


def test_weight_bytes_moe_ep_and_tp():
    cfg = load("deepseek-v3")
    assert cfg.weight_dtype == "fp8" and cfg.kv_dtype == "bf16"       # from quantization_config
    h, e, fe, n_moe = 7168, 256, 2048, 58
    expert = 3 * h * fe
    full = cfg.weight_bytes(1, 1)
    # FP8 GEMM weights (1 byte); embeddings, LM head, routers and norms in BF16 (2 bytes).
    bf16_params = 2 * 129280 * h + n_moe * h * e + 61 * (2 * h + 512 + 1536) + h
    assert full == pytest.approx((cfg.total_params() - bf16_params) * 1 + bf16_params * 2)
    # EP 8: each GPU holds 32 whole routed experts instead of all 256.
    assert full - cfg.weight_bytes(1, 8) == pytest.approx(n_moe * (e - 32) * expert * 1)
    # TP 8 without EP splits every routed expert 8 ways: the same routed bytes as EP 8, so the two layouts
    # differ only by the TP-split attention, dense MLPs, shared experts and embeddings.
    attn_saved = 61 * (sum(n * k for n, k in cfg.attention_gemms(1)) - sum(n * k for n, k in cfg.attention_gemms(8)))
    dense_saved = (3 * 3 * h * 18432 + n_moe * expert) * 7 / 8
    embed_saved = 2 * 129280 * h * 2 * 7 / 8
    assert cfg.weight_bytes(1, 8) - cfg.weight_bytes(8, 1) == pytest.approx(attn_saved + dense_saved + embed_saved)
    with pytest.raises(SpecsimInputError, match="'ep'"):
        cfg.weight_bytes(1, 512)
    with pytest.raises(SpecsimInputError, match="'tp'"):
        cfg.weight_bytes(0)


def test_deepseek_mla_shapes_and_kv():
    cfg = load("deepseek-v3")
    assert (cfg.kv_lora_rank, cfg.q_lora_rank, cfg.rope_dim, cfg.head_dim, cfg.v_head_dim) == (512, 1536, 64, 128, 128)
    assert (cfg.num_experts, cfg.top_k, cfg.expert_ffn, cfg.num_shared_experts, cfg.first_dense_layers) == (
        256, 8, 2048, 1, 3)
    assert cfg.kv_bytes_per_token(1) == 61 * 576 * 2 == cfg.kv_bytes_per_token(8)   # MLA latent: not split by TP
    assert cfg.attention_gemms(1) == MODELS["deepseek-v3"].attention_gemms(1)
    assert load("deepseek-v3", kv_dtype="fp8").kv_bytes_per_token(1) == 61 * 576


def test_presets_keep_their_results():
    # Closed forms of the pre-existing formulas (bf16): other modules' tests depend on them.
    assert MODELS["llama2-7b"].kv_bytes_per_token(1) == 2 * 32 * 32 * 128 * 2
    assert MODELS["llama2-70b"].kv_bytes_per_token(4) == 2 * 80 * 2 * 128 * 2
    assert MODELS["deepseek-v3"].kv_bytes_per_token(1) == 61 * (512 + 64) * 2
    assert MODELS["llama2-70b"].attention_gemms(4) == [(16 * 128 + 2 * 2 * 128, 8192), (8192, 16 * 128)]
    assert MODELS["deepseek-v3"].attention_gemms(1) == [(1536, 7168), (128 * 192, 1536), (576, 7168),
                                                        (128 * 256, 512), (7168, 128 * 128)]
    assert analytic.ModelConfig is ModelConfig and analytic.MODELS is MODELS


def test_mla_without_q_lora_uses_a_plain_query_projection():
    cfg = ModelConfig("lite", 2, 2048, 16, 16, 128, 10944, 1000, kv_lora_rank=512, q_lora_rank=0, rope_dim=64)
    assert cfg.attention_gemms(1) == [(16 * 192, 2048), (576, 2048), (16 * 256, 512), (2048, 16 * 128)]


def test_qwen_moe_shared_expert_and_dense_layers():
    base = json.loads((HF / "qwen3-30b-a3b.json").read_text())
    cfg = model_from_hf_config({**base, "model_type": "qwen2_moe", "shared_expert_intermediate_size": 5632,
                                "decoder_sparse_step": 2, "mlp_only_layers": [1, 2]})
    # Sparse layers: (i + 1) % 2 == 0 and not in [1, 2] -> 3, 5, ..., 47 (23 of 48); the other 25 are dense.
    assert cfg.first_dense_layers == 25 and cfg.num_dense_layers == 25
    assert (cfg.num_shared_experts, cfg.shared_expert_ffn, cfg.shared_ffn) == (1, 5632, 5632)
    assert cfg.name == "qwen2_moe"
    dense = load("qwen3-30b-a3b")
    assert dense.first_dense_layers == 0 and dense.num_shared_experts == 0


def test_dtype_detection_and_overrides():
    base = json.loads((HF / "llama-3.1-8b.json").read_text())
    assert model_from_hf_config({**base, "torch_dtype": "float16"}).kv_dtype == "fp16"
    assert model_from_hf_config({**base, "torch_dtype": "float32"}).weight_dtype == "fp16"
    nvfp4 = {**base, "quantization_config": {"quant_method": "modelopt", "quant_algo": "NVFP4"}}
    assert model_from_hf_config(nvfp4).weight_dtype == "fp4"
    assert load("llama-3.1-8b", weight_dtype="fp4").weight_dtype == "fp4"
    assert set(BYTES_PER_DTYPE) == {"bf16", "fp16", "fp8", "fp4"}


def test_input_errors_name_file_and_key(tmp_path):
    base = json.loads((HF / "llama-3.1-8b.json").read_text())
    path = tmp_path / "config.json"
    path.write_text(json.dumps({k: v for k, v in base.items() if k != "vocab_size"}))
    with pytest.raises(SpecsimInputError) as err:
        model_from_hf_config(tmp_path)                      # a folder holding config.json
    assert err.value.file == str(path) and err.value.field == "vocab_size"
    path.write_text(json.dumps({"model_type": "bert", "hidden_size": 768}))
    with pytest.raises(SpecsimInputError, match="decoder-only") as err:
        model_from_hf_config(path)
    assert err.value.field == "model_type"
    with pytest.raises(SpecsimInputError, match="model_type"):
        model_from_hf_config({"model_type": "t5", "is_encoder_decoder": True})
    with pytest.raises(SpecsimInputError, match="num_hidden_layers"):
        model_from_hf_config({**base, "num_hidden_layers": "32"})
    with pytest.raises(SpecsimInputError, match="quant_method"):
        model_from_hf_config({**base, "quantization_config": {"quant_method": "awq", "bits": 4}})
    with pytest.raises(SpecsimInputError, match="weight_dtype"):
        model_from_hf_config(base, weight_dtype="int4")
    path.write_text("{not json")
    with pytest.raises(SpecsimInputError, match="JSON"):
        model_from_hf_config(path)
    with pytest.raises(SpecsimInputError, match="readable"):
        model_from_hf_config(tmp_path / "missing.json")
    with pytest.raises(SpecsimInputError, match="kv_dtype"):
        ModelConfig("x", 1, 8, 1, 1, 8, 8, 8, kv_dtype="int8")


def test_deepseek_v2_lite_null_q_lora_and_nested_text_config():
    base = json.loads((HF / "deepseek-v3.json").read_text())
    lite = {**base, "model_type": "deepseek_v2", "q_lora_rank": None, "num_hidden_layers": 27, "hidden_size": 2048,
            "num_attention_heads": 16, "num_key_value_heads": 16, "n_routed_experts": 64, "n_shared_experts": 2,
            "num_experts_per_tok": 6, "moe_intermediate_size": 1408, "first_k_dense_replace": 1,
            "intermediate_size": 10944, "vocab_size": 102400}
    del lite["quantization_config"]
    cfg = model_from_hf_config(lite)
    assert cfg.q_lora_rank == 0 and cfg.weight_dtype == "bf16"
    assert cfg.attention_gemms(1)[0] == (16 * (128 + 64), 2048)          # plain query projection
    assert cfg.total_params() / 1e9 == pytest.approx(15.7, rel=0.02)     # DeepSeek-V2-Lite model card: 15.7B
    # and 2.4B activated: DeepSeek counts the LM head but not the input embedding (Mistral and Qwen count both,
    # as active_params_per_token does); with that convention the counts agree.
    assert (cfg.active_params_per_token() - 102400 * 2048) / 1e9 == pytest.approx(2.4, rel=0.03)
    nested = {"model_type": "llava", "text_config": json.loads((HF / "llama-3.1-8b.json").read_text())}
    assert model_from_hf_config(nested).total_params() == load("llama-3.1-8b").total_params()


# ---- per-component weight dtypes (issue 20) ----------------------------------------------------------------

#: A toy MoE: 2 layers (1 dense MLP, 1 MoE of 4 routed experts of width 32 + 1 shared), MHA 4 x 16, vocab 100.
TOY = ModelConfig("toy", 2, 64, 4, 4, 16, 128, 100, num_experts=4, top_k=2, expert_ffn=32, num_shared_experts=1,
                  first_dense_layers=1, weight_dtype="fp8")


def test_weight_bytes_fp4_experts_bf16_attention_by_hand():
    m = replace(TOY, expert_dtype="fp4", attention_dtype="bf16")
    attention = 2 * ((64 + 2 * 64) * 64 + 64 * 64) * 2          # 2 layers of QKV + output, BF16
    dense = 3 * 64 * 128 * 1                                     # the dense layer's MLP, FP8 (weight_dtype)
    routed = 3 * 64 * 4 * 32 * 0.5                               # 4 routed experts, FP4
    shared = 3 * 64 * 32 * 1                                     # the shared expert stays in weight_dtype (FP8)
    bf16_rest = (64 * 4 + 2 * 2 * 64 + 64 + 2 * 100 * 64) * 2    # router, norms, embedding + LM head
    assert m.weight_bytes() == attention + dense + routed + shared + bf16_rest == 135296
    assert (m.gemm_dtype("experts"), m.gemm_dtype("attention"), m.gemm_dtype("other")) == ("fp4", "bf16", "fp8")
    # EP 2: each GPU holds 2 whole experts (half the routed bytes); the rest as at TP 1.
    assert m.weight_bytes(1, 2) == m.weight_bytes() - 3 * 64 * 2 * 32 * 0.5


def test_default_dtypes_are_the_weight_dtype_and_change_nothing():
    assert TOY.expert_dtype is None and TOY.attention_dtype is None
    assert {TOY.gemm_dtype(p) for p in ("experts", "attention", "other")} == {"fp8"}
    same = replace(TOY, expert_dtype="fp8", attention_dtype="fp8")
    assert same.weight_bytes() == TOY.weight_bytes() and same.weight_bytes(1, 2) == TOY.weight_bytes(1, 2)
    for name, m in MODELS.items():                               # the presets are single-dtype
        assert m.gemm_dtype("experts") == m.gemm_dtype("attention") == m.weight_dtype, name
    with pytest.raises(SpecsimInputError) as err:
        replace(TOY, expert_dtype="int3")
    assert err.value.field == "expert_dtype"
    with pytest.raises(SpecsimInputError):
        TOY.gemm_dtype("router")


def _gpt_oss_like(exclude: list[str]) -> dict:
    """A Mixtral-keyed MoE config with gpt-oss's quantization_config shape (MXFP4 experts)."""
    return {"model_type": "gpt_oss", "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4,
            "num_key_value_heads": 4, "head_dim": 16, "intermediate_size": 32, "vocab_size": 100,
            "num_local_experts": 4, "num_experts_per_tok": 2, "torch_dtype": "bfloat16",
            "quantization_config": {"quant_method": "mxfp4", "modules_to_not_convert": exclude}}


def test_config_json_keeps_excluded_components_unquantized():
    m = model_from_hf_config(_gpt_oss_like(["model.layers.*.self_attn", "model.layers.*.mlp.router",
                                            "model.embed_tokens", "lm_head"]))
    assert (m.weight_dtype, m.attention_dtype, m.expert_dtype) == ("fp4", "bf16", None)
    # compressed-tensors' regex form, and the experts kept out as well
    qc = {"quant_method": "compressed-tensors", "format": "nvfp4-pack-quantized",
          "ignore": ["lm_head", "re:.*self_attn.*", "re:.*mlp.experts.*"]}
    m = model_from_hf_config({**_gpt_oss_like([]), "quantization_config": qc})
    assert (m.weight_dtype, m.attention_dtype, m.expert_dtype) == ("fp4", "bf16", "bf16")
    # one layer's attention kept out does not make every layer's attention BF16; no exclusions: one dtype
    assert model_from_hf_config(_gpt_oss_like(["model.layers.0.self_attn"])).attention_dtype is None
    plain = model_from_hf_config(_gpt_oss_like([]))
    assert (plain.weight_dtype, plain.attention_dtype, plain.expert_dtype) == ("fp4", None, None)
    # explicit arguments win over the config
    m = model_from_hf_config(_gpt_oss_like(["model.layers.*.self_attn"]), attention_dtype="fp8", expert_dtype="fp8")
    assert (m.attention_dtype, m.expert_dtype) == ("fp8", "fp8")
    with pytest.raises(SpecsimInputError) as err:
        model_from_hf_config(_gpt_oss_like([]), expert_dtype="int4")
    assert err.value.field == "expert_dtype"
