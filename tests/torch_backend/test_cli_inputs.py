"""Bad options and files of ``specsim torch ...`` and ``specsim replay``: one ``specsim: error`` line naming the
option or file and what was expected, exit status 2, never a traceback (the reviewer's defect list, item 1).

Every case fails before any decoding or training starts (the checks run first), so each costs a target load.
"""

from __future__ import annotations

import json
import os
import sys

import pytest

if os.environ.get("CI", "").lower() == "true" and os.environ.get("SPECSIM_TORCH_PHASE") == "1":
    import torch  # noqa: F401  (the torch phase of .ci/run: a missing torch is a failure, never a skip)
else:
    torch = pytest.importorskip("torch")

from conftest import REPO  # noqa: E402
from specsim.cli import main  # noqa: E402

TINY = REPO / "specsim" / "data" / "torch"
DSPARK = str(TINY / "tiny" / "dspark.pt")


def _cli(monkeypatch, capsys, *args) -> tuple[int, str]:
    monkeypatch.setattr(sys, "argv", ["specsim", *map(str, args)])
    with pytest.raises(SystemExit) as e:
        main()
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return e.value.code, " ".join(err.split())


@pytest.fixture
def profile(tmp_path):
    p = tmp_path / "P.json"
    p.write_text(json.dumps({"batch_tokens": [1, 2, 4], "step_time_s": [5e-4, 6e-4, 7e-4]}))
    return p


def _decode(profile, *extra):
    return ["torch", "decode", "--target", "tiny", "--prompts", "2", "--max-new-tokens", "16",
            "--profile", profile, *extra]


def test_sts_file_with_too_few_temperatures_names_the_file_and_gamma(monkeypatch, capsys, tmp_path, profile):
    sts = tmp_path / "TEMPS.json"
    sts.write_text(json.dumps({"temperatures": [1.0] * 5}))
    code, err = _cli(monkeypatch, capsys, *_decode(profile, "--drafter-ckpt", DSPARK, "--sts", sts))
    assert code == 2
    assert f"specsim: error: {sts}, field 'temperatures': expected 7 numbers > 0, one per draft position of " \
           "--gamma 7" in err
    assert "got [1.0, 1.0, 1.0, 1.0, 1.0]" in err
    sts.write_text(json.dumps({"temperatures": [1.0, 1.0, 0.0, 1.0, 1.0, 1.0, 1.0]}))
    code, err = _cli(monkeypatch, capsys, *_decode(profile, "--drafter-ckpt", DSPARK, "--sts", sts))
    assert code == 2 and f"{sts}, field 'temperatures': expected 7 numbers > 0" in err


def test_gamma_beyond_the_drafters_block_names_the_option_and_the_checkpoint(monkeypatch, capsys, profile):
    code, err = _cli(monkeypatch, capsys, *_decode(profile, "--drafter-ckpt", DSPARK, "--gamma", "10"))
    assert code == 2
    assert f"specsim: error: --gamma: expected 1..7 (the block length drafter {DSPARK} was trained with), got 10" \
           in err


def test_a_speculating_policy_without_a_checkpoint_asks_for_one(monkeypatch, capsys, profile):
    code, err = _cli(monkeypatch, capsys, *_decode(profile))
    assert code == 2
    assert "specsim: error: --drafter-ckpt: expected a drafter checkpoint (.pt, from specsim torch train) for " \
           "policy 'dspark' (only --policy none decodes without one), got none" in err


@pytest.mark.parametrize("content,got", [
    (b"garbage\n", "got a file torch.load cannot unpickle (not a torch checkpoint, or a corrupt one)"),
    (b"", "got an empty or truncated file"),
])
def test_a_file_that_is_not_a_checkpoint_is_named(monkeypatch, capsys, tmp_path, profile, content, got):
    bad = tmp_path / "bad.pt"
    bad.write_bytes(content)
    code, err = _cli(monkeypatch, capsys, *_decode(profile, "--drafter-ckpt", bad))
    assert code == 2
    assert f"specsim: error: {bad}: expected a drafter checkpoint for this target (written by specsim torch " \
           f"train), {got}" in err


def test_a_checkpoint_of_the_wrong_kind_is_named(monkeypatch, capsys, tmp_path, profile):
    tensor = tmp_path / "tensor.pt"
    torch.save(torch.zeros(3), tensor)
    code, err = _cli(monkeypatch, capsys, *_decode(profile, "--drafter-ckpt", tensor))
    assert code == 2 and f"{tensor}: expected a drafter checkpoint" in err
    assert "got a torch file holding a Tensor" in err
    code, err = _cli(monkeypatch, capsys, *_decode(profile, "--drafter-ckpt", TINY / "tiny_target.pt"))
    assert code == 2 and "got no 'family' entry" in err
    code, err = _cli(monkeypatch, capsys, "torch", "profile", "--target", tensor, "--out", tmp_path / "p.json")
    assert code == 2 and f"{tensor}: expected a tiny-target checkpoint (written by specsim torch train-target), " \
                         "got a torch file holding a Tensor" in err


def test_decode_options_out_of_range(monkeypatch, capsys, profile):
    code, err = _cli(monkeypatch, capsys, *_decode(profile, "--drafter-ckpt", DSPARK, "--temperature", "0"))
    assert code == 2 and "specsim: error: --temperature: expected a sampling temperature > 0 (or --greedy), got 0.0" \
        in err
    code, err = _cli(monkeypatch, capsys, *_decode(profile, "--drafter-ckpt", DSPARK, "--prompt-tokens", "500"))
    assert code == 2
    assert "specsim torch decode, field '--prompt-tokens + --max-new-tokens': expected prompt + output + gamma + 1 " \
           "<= 512 tokens (the target's context length), got 524" in err
    for opt in ("--prompts", "--max-new-tokens", "--prompt-tokens", "--gamma"):
        code, err = _cli(monkeypatch, capsys, *_decode(profile, "--drafter-ckpt", DSPARK, opt, "0"))
        assert code == 2 and f"specsim: error: Invalid value for '{opt}'" in err


def test_train_measure_and_profile_options(monkeypatch, capsys, tmp_path):
    code, err = _cli(monkeypatch, capsys, "torch", "train", "--out", tmp_path / "t", "--drafter", "dspark,bogus")
    assert code == 2 and "specsim: error: --drafter: expected comma-separated drafter families out of " \
                         "['autoregressive', 'parallel'" in err and "got 'bogus'" in err
    code, err = _cli(monkeypatch, capsys, "torch", "train", "--out", tmp_path / "t", "--seq-len", "600")
    assert code == 2 and "specsim torch train, field '--seq-len': expected tokens per sequence <= 512 tokens" in err
    (tmp_path / "empty").mkdir()
    code, err = _cli(monkeypatch, capsys, "torch", "measure", "--ckpt-dir", tmp_path / "empty", "--out", tmp_path / "m")
    assert code == 2 and "field '--ckpt-dir': expected a folder with <family>.pt drafter checkpoints" in err
    code, err = _cli(monkeypatch, capsys, "torch", "measure", "--ckpt-dir", TINY / "tiny", "--out", tmp_path / "m",
                     "--gamma", "9")
    assert code == 2 and "--gamma: expected 1..7 (the block length drafter" in err and "got 9" in err
    for opt in ("--max-batch-tokens", "--repeats"):
        code, err = _cli(monkeypatch, capsys, "torch", "profile", "--out", tmp_path / "p.json", opt, "0")
        assert code == 2 and f"Invalid value for '{opt}'" in err


def test_outputs_are_checked_before_any_work(monkeypatch, capsys, tmp_path, profile):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    code, err = _cli(monkeypatch, capsys, "torch", "profile", "--out", blocker / "P.json")
    assert code == 2 and f"specsim: error: --out: expected a folder path (not under a file), got {blocker}" in err
    code, err = _cli(monkeypatch, capsys, *_decode(profile, "--policy", "none", "--out", blocker / "o.parquet"))
    assert code == 2 and "specsim: error: --out: expected a folder path (not under a file)" in err
    code, err = _cli(monkeypatch, capsys, "torch", "measure", "--ckpt-dir", TINY / "tiny", "--out", blocker)
    assert code == 2 and f"--out: expected a folder (it holds several files), not an existing file, got {blocker}" \
        in err
