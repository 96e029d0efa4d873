"""A command stopped by Ctrl-C (or failing) removes the output folders it created and left empty, and nothing
else: a fresh user's ``specsim run --out DIR`` interrupted with Ctrl-C left an empty ``DIR`` behind."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import REPO
from helpers import run_cli
from specsim.errors import SpecsimInputError

PROD = str(REPO / "traces" / "prod.jsonl")


def _stop_with(monkeypatch, error: BaseException, write: Path | None = None) -> None:
    import specsim.simulation

    def stopped(*args, **kwargs):
        if write is not None:
            write.write_text("partial")
        raise error
    monkeypatch.setattr(specsim.simulation, "simulate", stopped)


@pytest.mark.parametrize("error, code", [(KeyboardInterrupt(), 130),
                                         (SpecsimInputError("t.jsonl", None, None, "a servable trace"), 2)])
def test_a_run_stopped_before_it_wrote_removes_the_folders_it_created(tmp_path, capsys, monkeypatch, error, code):
    out = tmp_path / "runs" / "d64"
    _stop_with(monkeypatch, error)
    assert run_cli(["run", "--trace", PROD, "--num-requests", "8", "--out", str(out)]) == code
    err = " ".join(capsys.readouterr().err.split())
    assert f"note: created folder {out} for --out" in err
    assert (f"note: removed {out} and {out.parent}, created for --out by this command and left empty") in err
    assert not out.parent.exists() and tmp_path.is_dir()


def test_a_folder_that_existed_or_holds_a_file_is_kept(tmp_path, capsys, monkeypatch):
    before = tmp_path / "mine"
    before.mkdir()
    _stop_with(monkeypatch, KeyboardInterrupt())
    assert run_cli(["run", "--trace", PROD, "--num-requests", "8", "--out", str(before)]) == 130
    assert before.is_dir() and "removed" not in capsys.readouterr().err       # not created by this command
    fresh = tmp_path / "fresh"
    _stop_with(monkeypatch, KeyboardInterrupt(), write=fresh / "partial.txt")
    assert run_cli(["run", "--trace", PROD, "--num-requests", "8", "--out", str(fresh)]) == 130
    assert (fresh / "partial.txt").read_text() == "partial" and "removed" not in capsys.readouterr().err


def test_a_run_that_finishes_keeps_its_folder_and_the_next_command_does_not_touch_it(tmp_path, capsys):
    out = tmp_path / "ok"
    assert run_cli(["run", "--trace", PROD, "--num-requests", "8", "--out", str(out)]) == 0
    assert (out / "summary.json").is_file()
    empty = tmp_path / "plots"                        # created by a plot that then fails: removed; ok/ stays
    assert run_cli(["plot", str(tmp_path / "nosweep"), "--out", str(empty)]) == 2
    assert not empty.exists() and (out / "summary.json").is_file()
