"""The CUDA-graph capture limit and the eager step beyond it (issue 20)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from specsim.errors import SpecsimInputError
from specsim.hardware.profile import load_profile, resolve_profile
from specsim.hardware.stepmodel import EngineTerms, step_model, step_model_of

PROFILES = Path(__file__).resolve().parent.parent / "specsim" / "data" / "profiles"


def test_inside_the_capture_size_a_batch_costs_its_padded_graph_size_beyond_it_the_eager_cost():
    terms = replace(EngineTerms(), cudagraph_max_tokens=256, eager_kernel_s=5e-6)
    sm = step_model("qwen3-8b", "h100", terms=terms)
    prof = sm.profile(1024)
    # inside: 250 tokens run in the 256 graph, the graph's GPU time only
    assert prof.step_time(250) == prof.step_time(256) == pytest.approx(sm.step_time([256], [0])[0], rel=1e-12)
    assert sm.breakdown([256])["eager"][0] == 0.0
    # beyond: 260 tokens run eager (multiple-of-8 grid: 264), every kernel launched from the host
    eager = sm.breakdown([264], [0])                                     # the table: R = 0, K = 0
    n_kernels = eager["kernels"][0] / terms.kernel_s
    assert eager["eager"][0] == pytest.approx(n_kernels * 5e-6, rel=1e-12)
    assert prof.step_time(260) == pytest.approx(sum(v[0] for v in eager.values()), rel=1e-12)
    # the cliff: the first eager size costs its GPU time plus the launches, more than the last graph
    gpu_only = sum(v[0] for k, v in eager.items() if k != "eager")
    assert prof.step_time(260) - gpu_only == pytest.approx(n_kernels * 5e-6, rel=1e-9)
    assert prof.step_time(260) > prof.step_time(256) + 0.9 * n_kernels * 5e-6
    # mixed (prefill-sharing) steps: no padding, eager beyond the same limit
    assert prof.mixed_step_time(264) == pytest.approx(prof.step_time(264), rel=1e-12)
    assert prof.metadata["cudagraph_max_tokens"] == 256
    # no graphs at all (--enforce-eager): every size pays the launches
    none = step_model("qwen3-8b", "h100", terms=replace(terms, cudagraph_max_tokens=0))
    assert none.breakdown([1])["eager"][0] > 0


def test_capture_terms_are_checked_and_travel_with_the_profile():
    with pytest.raises(SpecsimInputError, match="cudagraph_max_tokens"):
        EngineTerms(cudagraph_max_tokens=-1)
    with pytest.raises(SpecsimInputError, match="eager_kernel_s"):
        EngineTerms(eager_kernel_s=-1e-6)
    sm = step_model("qwen3-8b", "h100", terms=replace(EngineTerms(), cudagraph_max_tokens=128))
    back = step_model_of(sm.profile(512))
    assert back.terms.cudagraph_max_tokens == 128


def test_bundled_moe_profile_with_a_capture_limit_has_its_cliff():
    # h200-deepseek-v3-tp8-graphs256-terms: DeepSeek-V3 on 8x H200 (TP 8, fp8) with CUDA graphs captured up to
    # 256 tokens (vLLM's min(2 x max_num_seqs, 512) at max_num_seqs 128): a K = 7 verification batch of more
    # than 32 requests runs eager
    prof = resolve_profile("h200-deepseek-v3-tp8-graphs256-terms")
    sm = step_model_of(prof)
    assert sm.terms.cudagraph_max_tokens == 256 and sm.model.num_experts == 256 and sm.tp == 8
    jump = prof.step_time(264) - prof.step_time(256)
    slope = (prof.step_time(256) - prof.step_time(128)) / 128          # per token inside the graphs
    assert jump > 20 * slope * 8                                        # a cliff, not the usual 8 tokens' worth
    assert np.all(np.diff(prof.step_time_s[prof.batch_tokens > 256]) >= -1e-12)


def test_a_profile_written_before_the_new_terms_keeps_its_costs(tmp_path):
    # A step model saved before issue 20 names no eager or speculation term (the bundled v4-*-rank-terms did
    # until their FP4 re-fit of 2026-12-02): rebuilt, it gains none, whatever EngineTerms' defaults are now
    doc = json.loads((PROFILES / "v4-flash-rank-terms.json").read_text())
    for key in ("spec_step_s", "spec_request_s", "spec_zero_draft_pays", "cudagraph_max_tokens", "eager_kernel_s"):
        doc["metadata"]["step_model"]["terms"].pop(key, None)
        doc.pop(key, None)
    (tmp_path / "old.json").write_text(json.dumps(doc))
    prof = load_profile(tmp_path / "old.json")
    terms = step_model_of(prof).terms
    assert EngineTerms().spec_step_s > 0 and EngineTerms().eager_kernel_s > 0
    assert (terms.eager_kernel_s, terms.spec_step_s, terms.spec_request_s) == (0.0, 0.0, 0.0)
    assert prof.speculation_s(64, 64) == 0.0


def test_small_capture_limits_are_described_as_they_run():
    """`profile analytic --cudagraph-max-tokens 5` wrote 'capture sizes 1, 2, 4, 8..5 step 8' and `--terms` compared
    B = 5 with 13; 0 read '8..0'. The captured sizes are the grid's up to the limit, the first eager one next."""
    from specsim.hardware.analytic import capture_sizes, capture_text

    assert [capture_text(c) for c in (512, 200, 13, 5, 0)] == ["1, 2, 4, 8..248 step 8, 256..512 step 16",
                                                               "1, 2, 4, 8..200 step 8", "1, 2, 4, 8", "1, 2, 4",
                                                               "none"]
    sizes, first = capture_sizes(5)
    assert sizes.tolist() == [1, 2, 4] and first == 8
    assert capture_sizes(512)[1] == 520 and capture_sizes(0)[0].size == 0 and capture_sizes(0)[1] == 1


@pytest.mark.parametrize("gpu, cap", [("b200", 1024), ("gb200", 1024), ("b300", 1024), ("gb300", 1024),
                                      ("h100", 512), ("h200", 512), ("mi300x", 512), ("rtxpro6000", 512)])
def test_the_default_capture_limit_is_vllms_for_the_gpu(gpu, cap):
    """vLLM >= 0.28 (PR 49390) captures up to 1,024 tokens on data-center Blackwell (compute capability 10.x) and
    512 elsewhere; a B200 step model built with the defaults had charged eager launches from 520 tokens on."""
    from specsim.hardware.analytic import default_capture_tokens

    sm = step_model("qwen3-8b", gpu)
    assert sm.terms.cudagraph_max_tokens == cap == default_capture_tokens(sm.gpu)
    assert sm.breakdown([cap])["eager"][0] == 0.0 and sm.breakdown([cap + 8])["eager"][0] > 0.0
    assert step_model_of(sm.profile(2048)).terms.cudagraph_max_tokens == cap
    # a limit the user sets is kept, on any GPU, and so is the default of an already built model's copies
    assert sm.with_terms(cudagraph_max_tokens=256).terms.cudagraph_max_tokens == 256
    assert step_model("qwen3-8b", gpu, terms=EngineTerms(cudagraph_max_tokens=0)).terms.cudagraph_max_tokens == 0
    assert sm.with_terms(kernel_s=4e-6).terms.cudagraph_max_tokens == cap


def test_a_profile_without_a_capture_limit_keeps_the_512_it_was_built_with(tmp_path):
    """A B200 profile saved before the limit was a term ran 512: rebuilt, it does not gain the new default."""
    doc = json.loads((PROFILES / "b200-qwen3-8b-tp1-terms.json").read_text())
    doc["metadata"]["step_model"]["terms"].pop("cudagraph_max_tokens")
    (tmp_path / "old.json").write_text(json.dumps(doc))
    assert step_model_of(load_profile(tmp_path / "old.json")).terms.cudagraph_max_tokens == 512
    assert step_model_of(resolve_profile("b200-qwen3-8b-tp1-terms")).terms.cudagraph_max_tokens == 1024


def test_the_capture_sizes_are_vllms_list_and_a_decode_step_pays_its_graph():
    """vLLM >= 0.11 captures 1, 2, 4, every 8 to 248 and every 16 from 256 (3 + 31 + 17 = 51 sizes at 512, 83 at
    Blackwell's 1,024); specsim padded to every multiple of 8 up to the limit, so a 264-token step ran a
    264-token graph vLLM does not have."""
    from specsim.hardware.analytic import capture_list, graph_limit, padded_tokens

    assert capture_list(512).tolist() == [1, 2, 4, *range(8, 256, 8), *range(256, 513, 16)]
    assert capture_list(512).size == 51 and capture_list(1024).size == 83 and capture_list(0).size == 0
    assert graph_limit(500) == 496 and graph_limit(200) == 200 and graph_limit(0) == 0   # vLLM truncates to its list
    assert padded_tokens([0, 3, 249, 257, 264, 512, 513, 700], 512).tolist() == [0, 4, 256, 272, 272, 512, 520, 704]
    sm = step_model("qwen3-8b", "h100")
    prof = sm.profile(2048)
    assert prof.step_time(260) == prof.step_time(264) == prof.step_time(272) == pytest.approx(
        sm.step_time([272], [0])[0], rel=1e-12)
    # mixed (prefill-sharing) steps run piecewise graphs unpadded, on the same 8-token grid: a 264-token step
    # costs 264 tokens, read across the GEMMs' tile steps at 8-token resolution (a 16-token grid read 257
    # tokens 23% short on H100)
    for b in (257, 264, 300, 513):
        want = sm.step_time([float(np.ceil(b / 8) * 8)], [0])[0]
        assert prof.mixed_step_time(int(np.ceil(b / 8) * 8)) == pytest.approx(want, rel=1e-12)
    assert prof.mixed_step_time(264) < prof.step_time(264)
    # the table reaches the batch size it was asked for, whatever the limit (a limit of 500 stopped it at 496)
    for cap, top in ((500, 500), (255, 300), (3, 10), (1024, 1030), (0, 10)):
        p = step_model("qwen3-8b", "h100", terms=EngineTerms(cudagraph_max_tokens=cap)).profile(top)
        assert p.batch_tokens[-1] >= top and np.isfinite(p.step_time(top)), (cap, top)
    # a limit between two sizes: the steps above the last captured size run eager, as in vLLM
    cut = step_model("qwen3-8b", "h100", terms=EngineTerms(cudagraph_max_tokens=500))
    assert cut.breakdown([496])["eager"][0] == 0.0 and cut.breakdown([504])["eager"][0] > 0.0
