"""Checks of measured results shared by ``profile fit`` (plain and ``--spec`` points) and ``import-results``: units,
Little's law against the run's users, NaN, and the options that go with speculative points.

Each case writes a small inline result into ``tmp_path``; the values are worked by hand in the comments.
"""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from specsim.cli import _register, app
from specsim.errors import SpecsimInputError
from specsim.hardware.measured import read_vllm_result

_register()
runner = CliRunner()

#: A closed loop of 16 users, 200 requests of 1000 in / 256 out in 28.0875 s at 8.6 ms per step (Qwen3-8B on an
#: H100): Little's law R = (51,200 - 200) x 8.6 ms / 28.0875 s = 15.62 running requests.
PLAIN = {"backend": "vllm", "model_id": "Qwen/Qwen3-8B", "request_rate": "inf", "max_concurrency": 16,
         "duration": 28.0875, "completed": 200, "total_input_tokens": 200000, "total_output_tokens": 51200,
         "request_throughput": 7.1206, "output_throughput": 1822.875, "mean_ttft_ms": 54.0, "median_ttft_ms": 51.3,
         "mean_tpot_ms": 8.686, "median_tpot_ms": 8.6, "mean_itl_ms": 8.6, "median_itl_ms": 8.428,
         "mean_e2el_ms": 2247.0, "median_e2el_ms": 2247.0}
#: The same users speculating (tau 2.5, K 3): 4.242 ms per token, 4.2 ms per streamed chunk, 13.7875 s.
SPEC = {**PLAIN, "duration": 13.7875, "request_throughput": 14.5059, "output_throughput": 3713.509,
        "mean_ttft_ms": 32.0, "mean_tpot_ms": 4.242, "median_tpot_ms": 4.2, "mean_itl_ms": 4.2, "median_itl_ms": 4.116,
        "mean_e2el_ms": 1103.0, "median_e2el_ms": 1103.0, "spec_decode_acceptance_length": 2.5,
        "spec_decode_num_drafts": 20000, "spec_decode_draft_tokens": 60000, "spec_decode_accepted_tokens": 30000}


def _write(tmp_path, name: str, obj) -> str:
    p = tmp_path / name
    p.write_text(json.dumps(obj))
    return str(p)


def test_a_bad_gap_in_itls_is_named_by_request_and_gap_only(tmp_path):
    # the error printed the request's whole gap list (256 numbers); now the bad gap and where it is
    f = _write(tmp_path, "r.json", {**PLAIN, "ttfts": [0.05] * 3, "output_lens": [256] * 3,
                                    "itls": [[0.0086] * 255, [0.0086] * 255, [0.0086] * 4 + [-1.0] + [0.0086] * 250]})
    with pytest.raises(SpecsimInputError) as e:
        read_vllm_result(f)
    assert (e.value.field, e.value.got) == ("itls", "-1.0 at request 3, gap 5")
    assert "0.0086" not in str(e.value)


def test_num_spec_tokens_below_one_is_refused_up_front(tmp_path):
    # -2 was refused only after the plain fit, as "spec_decode_acceptance_length: expected (1, K + 1 = -1]"
    base = ["profile", "fit", _write(tmp_path, "v.json", PLAIN), "--model", "qwen3-8b", "--gpu", "h100",
            "--spec", _write(tmp_path, "s.json", SPEC), "--drafter", "eagle3", "--out", str(tmp_path / "o.json")]
    for option, value, field in (("--num-spec-tokens", "-2", "--num-spec-tokens"),
                                 ("--num-spec-tokens", "0", "--num-spec-tokens"),
                                 ("--acceptance-length", "0.5", "--acceptance-length")):
        r = runner.invoke(app, [*base, option, value])
        assert isinstance(r.exception, SpecsimInputError), r.output
        assert (r.exception.field, r.exception.got) == (field, value)
        assert "fitted:" not in r.output and not (tmp_path / "o.json").exists()
