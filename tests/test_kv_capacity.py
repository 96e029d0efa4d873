"""``cluster.gpu_memory_utilization``: the KV capacity derived as vLLM does, checked by hand for known models
and GPUs; the pair with ``kv_capacity_tokens`` is exclusive; a profile without a model shape is named."""

from __future__ import annotations

import numpy as np
import pytest

from specsim.errors import SpecsimInputError
from specsim.hardware.profile import StepTimeProfile
from specsim.engine.kv import DRAFTER_KV_FRACTION
from specsim.scenario import DEFAULT_KV_CAPACITY_TOKENS, ClusterConfig, load_scenario
from specsim.hardware.kv_capacity import kv_capacity
from specsim.simulation import simulate
from specsim.workload.trace import Trace


def test_llama2_7b_on_h100_at_90_percent_by_hand():
    """Llama-2-7B (Vidur metadata: 32 layers, 32 heads of 128, ffn 11008, vocab 32768), fp16, TP 1, on an
    H100 80GB (81559 MiB as the device reports it) at 0.9, gamma 7 and 256 sequences, prefill elsewhere: vLLM's
    profiling pass runs the largest verify batch, T = 256 x 8 = 2048 tokens, and samples one row per request,
    S = 256 rows of fp32 logits."""
    params = 32 * (4 * 4096 ** 2 + 3 * 4096 * 11008) + 2 * 32768 * 4096     # 6,744,440,832
    weights = params * 2                                                  # 13,488,881,664 B
    act = 2048 * (2 * 4096 + 2 * 11008) * 2 + 256 * 32768 * 4             # 157,286,400 B
    per_token = 2 * 32 * 32 * 128 * 2                                     # 524,288 B (K and V, all layers)
    memory = 81559 * 2 ** 20                                              # 85,520,809,984 B
    free = memory * 0.9 - weights - act                                   # 63,322,560,921.6 B
    assert int(free // per_token) == 120778
    want = 120778 // 16 * 16                                              # floored to whole blocks
    assert want == 120768

    sc = load_scenario(overrides=["cluster.gpu_memory_utilization=0.9"])
    cap = kv_capacity(sc, None, gamma=7, drafter_kv_fraction=DRAFTER_KV_FRACTION["parallel"])
    assert cap.tokens == want and cap.source == "gpu_memory_utilization"
    assert (cap.weights_bytes, cap.activation_bytes, cap.kv_bytes_per_token) == (weights, act, per_token)
    assert (cap.gpu, cap.gpu_memory_bytes, cap.activation_tokens, cap.tp) == ("h100", memory, 2048, 1)
    d = cap.as_dict()
    assert d["blocks"] == want // 16 == 7548 and d["activation_rows"] == 256
    assert d["target_tokens_with_drafter"] == int(want / (1 + 5 / 36)) == 106040
    line = cap.describe()
    for part in ("120,768 tokens", "7,548 blocks", "85.52 GB x 0.9", "weights 13.49 GB",
                 "activation reserve 0.16 GB", "524,288 B per token", "T = 2048 tokens", "S = 256 sampled rows",
                 "106,040 target tokens"):
        assert part in line, part


def test_gqa_model_at_tp4_by_hand():
    """Llama-2-70B (8 KV heads) on an 80 GB A100 at TP 4: each GPU holds 2 KV heads of every token."""
    sc = load_scenario(overrides=["cluster.gpu_memory_utilization=0.85", "profile.name=a100-llama2-70b-tp4",
                                  "cluster.max_num_seqs=64"])
    cap = kv_capacity(sc, None, gamma=3)
    per_token = 2 * 80 * (8 // 4) * 128 * 2                               # 81,920 B per GPU
    attn = (64 * 128 // 4 + 2 * 2 * 128) * 8192 + 8192 * (64 * 128 // 4)  # per layer per shard: qkv + o
    weights = (80 * attn + 80 * 3 * 8192 * 28672 / 4 + 2 * 32768 * 8192 / 4) * 2
    t = 64 * 4                                                            # verify batch; 64 rows sampled
    act = t * (2 * 8192 + 2 * 28672 / 4) * 2 + 64 * 32768 * 4
    want = int((81920 * 2 ** 20 * 0.85 - weights - act) // per_token) // 16 * 16
    assert cap.kv_bytes_per_token == per_token and cap.weights_bytes == pytest.approx(weights)
    assert cap.tokens == want and cap.tp == 4


def test_the_derived_capacity_is_the_one_the_run_uses():
    tr = Trace(request_id=[f"r{i}" for i in range(12)], arrival_s=np.arange(12) * 0.02,
               prompt_tokens=np.full(12, 200), output_tokens=np.full(12, 60), domain=["chat"] * 12, source="t")
    derived = simulate(tr, "dspark", load_scenario(overrides=["cluster.gpu_memory_utilization=0.9"]))
    fixed = simulate(tr, "dspark", load_scenario(overrides=["cluster.kv_capacity_tokens=120768"]))
    assert derived.summary["kv_capacity"]["tokens"] == 120768
    assert fixed.summary["kv_capacity"]["source"] == "kv_capacity_tokens"
    for k in ("duration_s", "mean_ttft_ms", "mean_tpot_ms", "steps", "output_throughput"):
        assert derived.summary[k] == fixed.summary[k], k


def test_default_and_explicit_capacity():
    cap = kv_capacity(load_scenario(), None, gamma=7)
    assert (cap.tokens, cap.source) == (DEFAULT_KV_CAPACITY_TOKENS, "default") == (110000, "default")
    assert "from the default" in cap.describe()
    cap = kv_capacity(load_scenario(overrides=["cluster.kv_capacity_tokens=4096"]), None, gamma=7)
    assert (cap.tokens, cap.source) == (4096, "kv_capacity_tokens")


def test_setting_both_is_an_error_and_the_range_is_checked():
    with pytest.raises(SpecsimInputError, match="gpu_memory_utilization") as e:   # both in one update
        load_scenario().with_updates({"cluster": {"kv_capacity_tokens": 4096, "gpu_memory_utilization": 0.9}})
    assert "--set" in str(e.value) and "kv_capacity_tokens" in str(e.value)
    later = load_scenario(overrides=["cluster.kv_capacity_tokens=4096", "cluster.gpu_memory_utilization=0.9"])
    assert (later.cluster.kv_capacity_tokens, later.cluster.gpu_memory_utilization) == (None, 0.9)  # the later wins
    with pytest.raises(SpecsimInputError, match="gpu_memory_utilization"):
        ClusterConfig(gpu_memory_utilization=1.5)
    with pytest.raises(SpecsimInputError, match="gpu_memory_utilization"):
        ClusterConfig(gpu_memory_utilization=0.0)


def test_a_profile_without_a_model_shape_is_named():
    prof = StepTimeProfile(np.array([1, 512]), np.array([0.01, 0.02]), metadata={"gpu": "h100"},
                           source="my-profile.json")
    sc = load_scenario(overrides=["cluster.gpu_memory_utilization=0.9"])
    with pytest.raises(SpecsimInputError, match="my-profile.json") as e:
        kv_capacity(sc, prof, gamma=7)
    assert "model's shape" in str(e.value)
    cpu = load_scenario(overrides=["cluster.gpu_memory_utilization=0.9", "profile.name=cpu-specsim-tiny"])
    with pytest.raises(SpecsimInputError, match="cpu-specsim-tiny.json"):
        kv_capacity(cpu, None, gamma=7)


def test_weights_larger_than_the_memory_leave_no_room():
    sc = load_scenario(overrides=["cluster.gpu_memory_utilization=0.9",
                                  "profile.name=h200-deepseek-v3-tp1-analytic"])
    with pytest.raises(SpecsimInputError, match="room for at least one KV block"):
        kv_capacity(sc, None, gamma=1)
    # the utilisation left unset on a step-model profile (DeepSeek-V3 FP8 at TP 8 on A100: 85.1 GB of weights per
    # GPU): the message says the default it assumed, not None
    from dataclasses import replace

    from specsim.hardware.model_config import MODELS
    from specsim.hardware.stepmodel import step_model
    prof = step_model(replace(MODELS["deepseek-v3"], weight_dtype="fp8"), "a100", tp=8).profile(64)
    with pytest.raises(SpecsimInputError, match=r"unset \(vLLM's default 0.9 assumed\)"):
        kv_capacity(load_scenario(), prof, gamma=1)


# ------------------------------------------------------------------ a linear-attention model's per-request state
HF_CONFIGS = __import__("pathlib").Path(__file__).parent / "data" / "hf_configs"


def _qwen_hybrid_on_b200():
    from specsim.hardware.model_config import model_from_hf_config
    from specsim.hardware.stepmodel import step_model
    return step_model(model_from_hf_config(HF_CONFIGS / "qwen3.8-27b.json"), "b200")


def test_linear_attention_state_blocks_by_hand():
    """Qwen3.8-27B: 48 Gated DeltaNet layers, each request's fp32 state 48 value heads x 128 x 128 x 4 B plus the
    convolution's last 3 inputs of (2 x 16 x 128 + 48 x 128) channels in bf16; 16 softmax layers of 4 KV heads
    x 256 x 2 (K, V) x 2 B = 65,536 B per token, 1 MiB per 16-token block. vLLM keeps 1 + gamma state copies
    (the rule where ``cluster.kv_capacity_tokens`` sets the pool; a derived pool is cut into the page layout)."""
    from specsim.hardware.kv_capacity import state_blocks_per_request

    sm = _qwen_hybrid_on_b200()
    per_layer = 48 * 128 * 128 * 4 + (2 * 16 * 128 + 48 * 128) * 3 * 2
    assert sm.model.linear_state_bytes(1) == 48 * per_layer == 153_944_064
    assert sm.model.kv_bytes_per_token(1) == 16 * 4 * 256 * 2 * 2 == 65_536
    assert state_blocks_per_request(sm.model, 1, 0, 65_536, 16) == (147, 153_944_064)      # 146.8 blocks
    # under speculation the convolution keeps one more input per draft: 8 x 48 x (3,145,728 + 10,240 x 10 x 2) B
    assert state_blocks_per_request(sm.model, 1, 7, 65_536, 16) == (1227, 8 * 48 * 3_350_528)  # 1227.0 blocks
    from specsim.hardware.model_config import MODELS
    dense = MODELS["llama2-7b"]
    assert state_blocks_per_request(dense, 1, 7, dense.kv_bytes_per_token(1), 16) == (0, 0.0)


def test_the_state_comes_out_of_the_pool_and_caps_the_running_requests():
    """With 8 state copies per request (DSpark k = 7) in vLLM's hybrid page layout (80 blocks of 17.0 MB, 1.36 GB)
    a B200 holds about 70 Qwen3.8-27B requests of 1,000 tokens (the public vLLM sweep's gauges: 72 running at 128
    users, docs/memory.md); without speculation (3 blocks of 51.4 MB) it holds them all. The engine counts in
    blocks of 832 tokens, each one block in every one of a request's 5 attention groups (85.2 MB)."""
    sm = _qwen_hybrid_on_b200()
    prof = sm.profile(max_batch_tokens=17_000)
    sc = load_scenario(overrides=['prefill.mode="colocated"', "prefill.chunk_tokens=16384",
                                  "cluster.gpu_memory_utilization=0.9"])
    plain, spec = kv_capacity(sc, prof, gamma=0), kv_capacity(sc, prof, 7, 0.3, 0.0, (5, True))
    assert (plain.state_blocks, plain.block_size, plain.layout.group_size) == (3, 784, 16)
    assert (spec.state_blocks, spec.block_size, spec.drafter_kv_fraction, spec.engine_groups) == (16, 832, 0.0, 5)
    assert spec.state_bytes == 80 * 5 * 832 * 4096
    assert "16 blocks of linear-attention state" in spec.describe() and "[16, 5, 48] in groups of 5" in spec.describe()
    # the pool is the memory left, in whole blocks of group size x page, 5 of them per engine block
    free = spec.gpu_memory_bytes * 0.9 - spec.weights_bytes - spec.activation_bytes
    assert spec.tokens // 832 == int(free // (5 * 832 * 4096)) // 5
    # a capacity set in tokens is the same pool in the scenario's blocks: the state still comes out of it
    fixed = kv_capacity(load_scenario(overrides=["cluster.kv_capacity_tokens=100000"]), prof, gamma=2)
    assert (fixed.tokens, fixed.source, fixed.state_blocks, fixed.layout) == (100000, "kv_capacity_tokens", 447, None)
    blocks = spec.tokens // 832
    assert 60 < blocks // (16 + 2) < 80                      # state + a 1,000-token request's two attention blocks
    # the header says how many requests of one attention block fit: 16 state + 1 attention engine blocks each
    assert f"so at most {blocks // 17:,} requests of up to 832 tokens run at once (17 blocks each" in spec.describe()
    tr = Trace(request_id=[f"r{i}" for i in range(640)], arrival_s=np.zeros(640), prompt_tokens=np.full(640, 200),
               output_tokens=np.full(640, 100), domain=["code"] * 640, source="t")
    res = simulate(tr, "static", sc, seed=0, profile=prof, gamma=7, drafter="dspark", concurrency=128)
    kvs = res.summary["kv_capacity"]
    assert (kvs["state_blocks"], kvs["block_size"], kvs["layout"]["group_size"]) == (16, 832, 5)
    # each running request holds its 16 state blocks and at least its 300-token request's 1 attention block
    assert res.steps["num_running"].max() <= blocks // (16 + 1) < 128
    # the summary's load figures are the step counts weighted by step time: the cap holds on average, the rest wait
    st, s = res.steps, res.summary
    assert s["mean_running_requests"] == pytest.approx((st.num_running * st.duration_s).sum() / s["duration_s"])
    assert s["mean_running_requests"] <= blocks // (16 + 1) and s["mean_waiting_requests"] > 0
    assert (res.steps["kv_blocks_used"] <= blocks).all()
    assert res.summary["completed"] + res.summary["unfinished"] + res.summary["not_issued"] == 640
    again = simulate(tr, "static", sc, seed=0, profile=prof, gamma=0, concurrency=128)
    assert again.steps["num_running"].max() == 128             # one state copy: all 128 users fit


def test_the_kv_manager_takes_and_returns_the_state_blocks():
    """Admission takes the KV blocks plus ``state_blocks``; a request that does not fit with its state waits;
    freeing it returns both (blocks conserved)."""
    from specsim.engine.kv_manager import KVManager
    from specsim.engine.state import ReplicaConfig, SlotRow, Slots

    cfg = ReplicaConfig(index=0, gamma=7, colocated=True, max_num_seqs=8, kv_allocation="paged", num_blocks=100,
                        block_size=16, prefix_caching=False, chunk_tokens=512, host_overhead_s=0.0, state_blocks=50)
    kv = KVManager(cfg, lazy=False)
    got = kv.admit(0, (), prompt_tokens=100, output_tokens=10, num_generated=0, margin=0)
    assert got.blocks == 7 and kv.pool.num_free == 100 - 7 - 50 == 43      # ceil(101 / 16) = 7 KV blocks
    assert kv.admit(1, (), prompt_tokens=100, output_tokens=10, num_generated=0, margin=0) is None   # 43 < 7 + 50
    s = Slots.empty(7)
    s.append([SlotRow(request=0, prompt_tokens=100, output_tokens=10, num_generated=0, prefill_left=100, kv_blocks=7,
                      kv_cached=0, draft_kv_blocks=0, draw_key=0, draw_base=np.zeros(7), decode_steps=0,
                      drafts_verified=0, drafts_accepted=0, last_verify_len=-1, last_accepted=-1, last_emit_s=0.0)])
    kv.free(s, 0)
    assert kv.pool.num_free == 100


def test_a_plain_table_whose_weights_do_not_fit_its_gpu_is_refused_at_the_default_capacity():
    # Llama-2-70B in FP16 on one 80 GB H100: 138 GB of weights (a fresh user's report: it ran at 110,000 tokens)
    sc = load_scenario(overrides=["profile.name=h100-llama2-70b-tp1"])
    with pytest.raises(SpecsimInputError, match="weights fit its GPUs") as e:
        kv_capacity(sc, None, gamma=7)
    assert e.value.field == "cluster.kv_capacity_tokens" and "137.98 GB" in str(e.value)
    forced = kv_capacity(load_scenario(overrides=["profile.name=h100-llama2-70b-tp1",
                                                  "cluster.kv_capacity_tokens=110000"]), None, gamma=7)
    assert (forced.tokens, forced.source) == (110000, "kv_capacity_tokens")       # set: the user's call


def test_an_activation_reserve_that_leaves_no_room_names_the_setting_that_sized_it(tmp_path):
    # weights that fit, a max_num_seqs of 1e9 (a fresh user's): the error names it in the scenario file, not the
    # profile's kv_capacity_tokens; in a replica that prefills, the chunk sizes the reserve
    path = tmp_path / "s.toml"
    path.write_text("[cluster]\nmax_num_seqs = 1000000000\n")
    with pytest.raises(SpecsimInputError) as e:
        kv_capacity(load_scenario(path), None, gamma=7)
    assert (e.value.file, e.value.line, e.value.field) == (str(path), 2, "cluster.max_num_seqs")
    assert "logits for 1,000,000,000 rows" in str(e.value)
    with pytest.raises(SpecsimInputError) as e:
        kv_capacity(load_scenario(overrides=['prefill.mode="colocated"', "prefill.chunk_tokens=100000000",
                                             "cluster.gpu_memory_utilization=0.9"]), None, gamma=7)
    assert e.value.field == "prefill.chunk_tokens"


def test_the_default_capacity_says_what_the_profiles_gpus_would_hold():
    eight = kv_capacity(load_scenario(overrides=["profile.name=h100-llama2-70b-tp8"]), None, gamma=0)
    assert eight.source == "default" and eight.memory_tokens > 10 * eight.tokens
    assert "less than the GPUs would hold" in eight.describe() and f"{eight.memory_tokens:,}" in eight.describe()
    one = kv_capacity(load_scenario(), None, gamma=7)     # Llama-2-7B on one H100: the default is sized for it
    assert abs(one.memory_tokens - one.tokens) <= 0.1 * one.tokens and "GPUs" not in one.describe()


def test_the_drafters_own_weights_come_out_of_the_kv_memory():
    """DSpark on Qwen3.8-27B: five of the target's layers (its shape), the 8 x 5120 -> 5120 projection of target
    hidden states and two rank-256 x 248,320 Markov factors, in BF16, beside the target's 54 GB; the embedding and LM
    head are the target's. The KV memory loses exactly those bytes (floored to whole blocks of vLLM's hybrid page
    layout: 16 pages of 832 tokens x 4,096 B, 54.5 MB, each 832 target tokens at gamma 7)."""
    from specsim.hardware.drafter import drafter_shape, drafter_weight_bytes
    from specsim.run_config import drafter_weights

    sm = _qwen_hybrid_on_b200()
    m = sm.model
    layers = drafter_shape("dspark", m, 5)
    by_hand = layers.weight_bytes(1) - 2 * 2 * m.vocab * m.hidden + (8 * 5120 * 5120 + 2 * 256 * 248_320) * 2
    dspark = drafter_weight_bytes("dspark", sm)
    assert dspark == pytest.approx(by_hand, rel=1e-12) and 4.3e9 < dspark < 4.5e9
    mtp = drafter_weight_bytes("mtp", sm)                     # one target layer and its 2 x 5120 -> 5120 eh_proj
    assert mtp == pytest.approx(drafter_shape("mtp", m, 1).weight_bytes(1) - 4 * m.vocab * m.hidden
                                + 2 * 5120 * 5120 * 2, rel=1e-12)
    prof = sm.profile(max_batch_tokens=17_000)
    sc = load_scenario(overrides=['prefill.mode="colocated"', "prefill.chunk_tokens=16384",
                                  "cluster.gpu_memory_utilization=0.9"])
    bare, loaded = kv_capacity(sc, prof, gamma=7), kv_capacity(sc, prof, 7, drafter_weights_bytes=dspark)
    assert loaded.weights_bytes == pytest.approx(bare.weights_bytes + dspark)
    block = 16 * 832 * 4096
    assert loaded.layout.block_bytes == block and loaded.block_size == 832
    assert abs((bare.tokens - loaded.tokens) / 832 - dspark / block) < 1
    assert "the drafter's 4.4" in loaded.describe()
    assert drafter_weights(sc, "dspark", 7, prof) == dspark and drafter_weights(sc, "dspark", 0, prof) == 0.0
    flat = StepTimeProfile.flat(0.01)
    assert drafter_weights(sc, "dspark", 7, flat) == 0.0      # a plain table: no shape to size the drafter from


def test_the_profiling_run_samples_one_row_per_dummy_request():
    """vLLM's profiling run spreads the step's token budget T over min(max_num_seqs, T) dummy requests and samples
    one row of fp32 logits for each: a colocated chunk of 128 tokens under 256 sequences samples 128 rows, a
    disaggregated replica's verify batch of 256 x 8 tokens samples 256 (Llama-2-7B: hidden 4096, ffn 11008, vocab
    32768, fp16)."""
    small = kv_capacity(load_scenario(overrides=["cluster.gpu_memory_utilization=0.9", 'prefill.mode="colocated"',
                                                 "prefill.chunk_tokens=128"]), None, gamma=7)
    assert (small.activation_tokens, small.activation_rows) == (128, 128)
    assert small.activation_bytes == 128 * (2 * 4096 + 2 * 11008) * 2 + 128 * 32768 * 4
    wide = kv_capacity(load_scenario(overrides=["cluster.gpu_memory_utilization=0.9"]), None, gamma=7)
    assert (wide.activation_tokens, wide.activation_rows) == (2048, 256)
