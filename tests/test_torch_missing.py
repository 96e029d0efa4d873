"""Every command of the real-model backend, where torch does not import: one input error naming the command and
the install steps, exit status 2, no traceback (torch made unimportable here, so this runs with torch installed
too)."""

from __future__ import annotations

import sys

import pytest

from conftest import REPO
from specsim.cli import main

PROD = str(REPO / "traces" / "prod.jsonl")

COMMANDS = [
    ("specsim replay", ["replay", "--trace", PROD, "--policy", "static", "--out", "{tmp}/replay"]),
    ("specsim torch decode", ["torch", "decode"]),
    ("specsim torch measure", ["torch", "measure", "--ckpt-dir", "{tmp}", "--out", "{tmp}/m"]),
    ("specsim torch profile", ["torch", "profile", "--out", "{tmp}/p.json"]),
    ("specsim torch train", ["torch", "train", "--out", "{tmp}/t"]),
    ("specsim torch train-target", ["torch", "train-target", "--out", "{tmp}/t.pt"]),
    ("specsim profile measure", ["profile", "measure", "--model", "llama2-7b", "--out", "{tmp}/pm.json"]),
]


@pytest.mark.parametrize("command,args", COMMANDS, ids=[c for c, _ in COMMANDS])
def test_a_command_that_needs_torch_says_so_where_torch_does_not_import(command, args, monkeypatch, capsys,
                                                                        tmp_path):
    for name in [m for m in sys.modules if m == "torch" or m.startswith("torch.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "torch", None)            # `import torch` raises ImportError
    monkeypatch.setattr(sys, "argv", ["specsim", *(a.format(tmp=tmp_path) for a in args)])
    with pytest.raises(SystemExit) as e:
        main()
    err = capsys.readouterr().err
    assert e.value.code == 2, err
    assert "Traceback" not in err
    assert f"{command}: expected torch" in err
    assert "pip install torch==2.13.0" in err and "torch is not installed" in err
