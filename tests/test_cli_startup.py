"""Start-up of the ``specsim`` command: help and listing load no numeric library (checked in ``sys.modules``).

Each check runs in a fresh interpreter (a subprocess), since this test process has long imported them all.
The checks are on module names, not on timings, so they hold on any machine.
"""

from __future__ import annotations

import json
import subprocess
import sys

#: Libraries no ``--help`` may import (each costs 0.1-0.7 s to import, or needs an optional extra).
HEAVY = ("numpy", "pandas", "scipy", "pyarrow", "matplotlib", "simpy", "torch")

# Walk every command and subcommand of the registered app, print each one's --help through main() and record
# the heavy top-level packages loaded after it; then write {"paths": [...], "loaded": {path: [...]}, ...} as JSON
# to the file named by the second argument.
WALK = r"""
import json, sys
import typer
from specsim.cli import _register, app, main

HEAVY, RESULT = set(sys.argv[1].split(",")), sys.argv[2]
_register()

def paths(cmd, prefix):
    yield prefix
    for name, sub in sorted(getattr(cmd, "commands", {}).items()):
        yield from paths(sub, prefix + [name])

before = {m.split(".")[0] for m in sys.modules} & HEAVY
loaded, codes, all_paths = {}, {}, list(paths(typer.main.get_command(app), []))
for p in all_paths:
    sys.argv = ["specsim", *p, "--help"]
    try:
        main()
    except SystemExit as e:
        codes[" ".join(p)] = e.code
    loaded[" ".join(p)] = sorted({m.split(".")[0] for m in sys.modules} & HEAVY)
with open(RESULT, "w") as f:
    json.dump({"before": sorted(before), "paths": [" ".join(p) for p in all_paths], "codes": codes,
               "loaded": loaded}, f)
"""


def _run_fresh(code: str, tmp_path) -> dict:
    """Run ``code`` in a fresh interpreter (argv: HEAVY joined by commas, a result file); return its JSON."""
    out = tmp_path / "result.json"
    proc = subprocess.run([sys.executable, "-c", code, ",".join(HEAVY), str(out)], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0 and out.is_file(), proc.stderr[-2000:]
    return json.loads(out.read_text())


def test_every_help_loads_no_numeric_library(tmp_path):
    res = _run_fresh(WALK, tmp_path)
    assert res["before"] == [], "importing specsim.cli and registering the commands loaded " + str(res["before"])
    # the walk reached the command families and their subcommands
    for p in ("", "run", "policies", "sweep", "trace synth", "profile import-vidur", "production predict",
              "torch decode", "counters", "fit", "calibrate", "replay"):
        assert p in res["paths"], p
    assert set(res["codes"].values()) == {0}, res["codes"]
    first_heavy = next((p for p in res["paths"] if res["loaded"][p]), None)
    assert first_heavy is None, f"'specsim {first_heavy} --help' imported {res['loaded'][first_heavy]}"


def test_policies_and_import_specsim_stay_light(tmp_path):
    code = r"""
import json, sys
heavy, result = set(sys.argv[1].split(",")), sys.argv[2]
import specsim
after_import = sorted({m.split(".")[0] for m in sys.modules} & heavy)
from specsim.cli import main
sys.argv = ["specsim", "policies", "--json"]
try:
    main()
except SystemExit as e:
    rc = e.code
with open(result, "w") as f:
    json.dump({"import": after_import, "rc": rc,
               "policies": sorted({m.split(".")[0] for m in sys.modules} & heavy)}, f)
"""
    res = _run_fresh(code, tmp_path)
    assert res["import"] == [] and res["rc"] == 0
    # listing the policies builds the registry (numpy, for the policy classes) but nothing heavier
    assert set(res["policies"]) <= {"numpy"}, res["policies"]
