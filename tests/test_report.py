"""`specsim report DIR`: one self-contained HTML page, checked in a real headless Chromium.

Chromium is driven through the DevTools protocol over a websocket (a minimal client below, standard library
only): the page must load without console errors or exceptions, every named figure must be present, loaded
and not blank (pixels of its screenshot), and every number the page shows must equal summary.json's.
Without Chromium the browser tests skip locally and FAIL under CI=true (.ci/run installs it).
"""

from __future__ import annotations

import base64
import io
import json
import os
import re
import shutil
import socket
import struct
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

import numpy as np
import pytest

from conftest import REPO
from helpers import run_cli
from specsim.cli import main
from specsim import fmt
from specsim.analysis.report import RUN_FIGURES, SWEEP_FIGURES, decision_rows, shown, write_report

PROD = str(REPO / "traces" / "prod.jsonl")
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]


# ------------------------------------------------------------------------------------------------ fixtures
@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    """A run directory written by the CLI (so summary.json carries the command line)."""
    out = tmp_path_factory.mktemp("run") / "r"
    _cli(["run", "--trace", PROD, "--policy", "dspark", "--num-requests", "60", "--concurrency", "8", "--json",
          "--out", str(out), "--seed", "1"])
    return out


@pytest.fixture(scope="module")
def sweep_dir(tmp_path_factory) -> Path:
    """A sweep directory written by the CLI (so sweep.json carries the command line): 2 policies x 2 loads x
    2 seeds."""
    out = tmp_path_factory.mktemp("sweep") / "s"
    _cli(["sweep", "--trace", PROD, "--out", str(out), "--policies", "mtp1,dspark", "--concurrency", "1,4",
          "--seeds", "2", "--num-requests", "16", "--executor", "serial", "--quiet"])
    return out


def _cli(args: list[str]) -> None:
    code = run_cli(args)
    assert not code, f"specsim {args[0]} failed with {code}"


# ------------------------------------------------------------------------------------ the page, no browser
def test_run_page_is_self_contained_and_shows_the_summary(run_dir):
    rep = write_report(run_dir)
    page = rep.path.read_text()
    s = json.loads((run_dir / "summary.json").read_text())
    assert rep.kind == "run" and rep.figures == tuple(RUN_FIGURES)
    assert s["command_line"].startswith("specsim run --trace ") and "--seed 1" in s["command_line"]
    # offline: no reference leaves the page (every src/href is a data: URI or a fragment)
    refs = re.findall(r'(?:src|href)="([^"]*)"', page)
    assert refs and all(r.startswith(("data:", "#")) for r in refs), refs
    assert "<script" not in page and "@import" not in page and "url(" not in page
    for fid in RUN_FIGURES:
        assert f'<figure id="fig-{fid}"><img' in page
    assert "</figure><figure" not in page        # captions of neighbouring figures ran together ("acceptedRunning")
    cells = re.findall(r'data-key="([^"]+)" data-value="([^"]+)">([^<]*)<', page)
    assert {"completed", "mean_ttft_ms", "output_throughput_per_gpu", "mean_acceptance_length"} <= {
        k for k, _, _ in cells}
    for key, exact, text in cells:
        assert text == fmt.value(_at(s, key)), key          # written as the CLI writes it
        assert float(exact) == _at(s, key), key              # and the exact number beside it
    # every number of summary.json is on the page (docs/report.md), the window's too in a closed loop
    numbers = {k for k, v in s.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    assert numbers <= {k for k, _, _ in cells}
    dom = next(iter(s["per_domain"]))
    assert f"per_domain.{dom}.mean_ttft_ms" in {k for k, _, _ in cells}
    if isinstance(s.get("window"), dict):
        assert "window.output_throughput_per_gpu" in {k for k, _, _ in cells}
        assert "Headline (closed-loop window)" in page
    import html
    assert html.escape(s["command_line"]) in page


def _at(s: dict, key: str):
    """The summary number a page cell's data-key names: its path of keys joined by dots, the longest key matched at
    each level (``window.p99.9_ttft_ms``: the window's p99.9_ttft_ms; ``per_domain.chat.mean_ttft_ms``)."""
    node, rest = s, key
    while rest:
        i = next(i for i in range(len(rest), 0, -1) if rest[:i] in node and (i == len(rest) or rest[i] == "."))
        node, rest = node[rest[:i]], rest[i + 1:]
    return node


def test_shown_rounds_to_six_significant_digits():
    assert shown(0.712345678) == "0.712346" and shown(1234567.89) == "1.23457e+06"
    assert shown(np.int64(120)) == "120" and shown(None) == "-" and shown(float("nan")) == "-"


def test_report_cli_and_bad_directory(monkeypatch, capsys, run_dir, tmp_path):
    monkeypatch.setattr(sys, "argv", ["specsim", "report", str(run_dir), "--out", str(tmp_path / "x.html")])
    with pytest.raises(SystemExit) as e:
        main()
    assert e.value.code == 0 and (tmp_path / "x.html").is_file()
    assert "run report with 4 figures" in capsys.readouterr().out
    monkeypatch.setattr(sys, "argv", ["specsim", "report", str(tmp_path)])
    with pytest.raises(SystemExit) as e:
        main()
    err = capsys.readouterr().err
    assert e.value.code == 2 and "a run directory" in err and len(err.strip().splitlines()) == 1


def test_the_run_page_shows_the_warnings_and_notices_the_run_printed(monkeypatch, capsys, run_dir, tmp_path):
    # the fixture run prints the speculation overhead and built-in acceptance notices (and the bundled trace's
    # unservable requests at 60 requests, where some exceed the window): the page lists them under Notes
    import html
    import json as js

    from specsim.cli.run_cmd import run_notes

    lines = [line for group in run_notes(js.loads((run_dir / "summary.json").read_text())) for line in group]
    assert any(line.startswith("notice: speculation's own overhead") for line in lines)
    monkeypatch.setattr(sys, "argv", ["specsim", "report", str(run_dir), "--out", str(tmp_path / "n.html")])
    with pytest.raises(SystemExit):
        main()
    page = html.unescape((tmp_path / "n.html").read_text())
    notes = page[page.index('id="notes"'):]
    for line in lines:
        assert " ".join(line.split())[9:60] in " ".join(notes.split())


# ----------------------------------------------------------------------------------------- headless browser
def _chromium() -> str:
    exe = next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome") if shutil.which(n)), None)
    if exe is None:
        why = "Chromium is not installed (apt-get install -y chromium)"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{why}; CI must install it (.ci/run does, as root with apt-get)")
        pytest.skip(why)
    return exe


class _Cdp:
    """A minimal DevTools-protocol client over one websocket (RFC 6455 text frames, client-masked)."""

    def __init__(self, ws_url: str) -> None:
        u = urllib.parse.urlparse(ws_url)
        self.sock = socket.create_connection((u.hostname, u.port), timeout=60)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall((f"GET {u.path} HTTP/1.1\r\nHost: {u.hostname}:{u.port}\r\nUpgrade: websocket\r\n"
                           f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n")
                          .encode())
        head = b""
        while b"\r\n\r\n" not in head:
            head += self.sock.recv(1)
        assert b" 101 " in head.split(b"\r\n")[0], head
        self.events: list[dict] = []
        self.next_id = 0

    def _exact(self, n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("DevTools websocket closed")
            buf += chunk
        return buf

    def _send(self, opcode: int, payload: bytes) -> None:
        n, mask = len(payload), os.urandom(4)
        size = bytes([0x80 | n]) if n < 126 else (bytes([0x80 | 126]) + struct.pack(">H", n) if n < 65536
                                                  else bytes([0x80 | 127]) + struct.pack(">Q", n))
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        self.sock.sendall(bytes([0x80 | opcode]) + size + mask + masked)

    def _message(self) -> dict:
        data = b""
        while True:
            b0, b1 = self._exact(2)
            n = b1 & 0x7F
            if n == 126:
                n = struct.unpack(">H", self._exact(2))[0]
            elif n == 127:
                n = struct.unpack(">Q", self._exact(8))[0]
            chunk = self._exact(n)
            op = b0 & 0x0F
            if op == 9:                        # ping
                self._send(10, chunk)
                continue
            if op == 8:
                raise ConnectionError("DevTools websocket closed")
            data += chunk
            if b0 & 0x80:
                return json.loads(data)

    def call(self, method: str, **params) -> dict:
        self.next_id += 1
        self._send(1, json.dumps({"id": self.next_id, "method": method, "params": params}).encode())
        while True:
            m = self._message()
            if m.get("id") == self.next_id:
                if "error" in m:
                    raise RuntimeError(f"{method}: {m['error']}")
                return m["result"]
            self.events.append(m)

    def wait_for(self, event: str, timeout_s: float = 30) -> None:
        end = time.monotonic() + timeout_s
        while not any(e.get("method") == event for e in self.events):
            if time.monotonic() > end:
                raise TimeoutError(event)
            self.events.append(self._message())


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    """A headless Chromium with a fresh profile; yields a function opening a file and returning a _Cdp."""
    exe = _chromium()
    ud = tmp_path_factory.mktemp("chromium-profile")
    proc = subprocess.Popen([exe, *CHROMIUM_FLAGS, f"--user-data-dir={ud}", "--remote-debugging-port=0",
                             "--window-size=1200,900", "about:blank"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        port_file = ud / "DevToolsActivePort"
        end = time.monotonic() + 60
        while not (port_file.is_file() and port_file.read_text().strip()):
            if proc.poll() is not None or time.monotonic() > end:
                pytest.fail(f"Chromium did not start its DevTools endpoint (exit status {proc.poll()})")
            time.sleep(0.1)
        port = int(port_file.read_text().split()[0])

        def open_page(path: Path, width: int = 1200, height: int = 900) -> _Cdp:
            targets = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=30).read())
            page = next(t for t in targets if t["type"] == "page")
            cdp = _Cdp(page["webSocketDebuggerUrl"])
            for domain in ("Page", "Runtime", "Log"):
                cdp.call(f"{domain}.enable")
            cdp.call("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1,
                     mobile=False)
            cdp.events.clear()
            cdp.call("Page.navigate", url=path.resolve().as_uri())
            cdp.wait_for("Page.loadEventFired")
            return cdp
        yield open_page
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()


_JS = """JSON.stringify({
  figures: Array.from(document.querySelectorAll('figure')).map(f => {
    const img = f.querySelector('img'); const svg = f.querySelector('svg'); const r = f.getBoundingClientRect();
    return {id: f.id, loaded: svg ? svg.getBBox().width > 0 : !!img && img.complete && img.naturalWidth > 0,
            x: r.left + window.scrollX, y: r.top + window.scrollY, w: r.width, h: r.height,
            hover: Array.from(f.querySelectorAll('svg use')).map(u => {
              const t = u.querySelector('title'); const b = u.getBoundingClientRect();
              return {text: t ? t.textContent : null, w: b.width};
            })};
  }),
  numbers: Object.fromEntries(Array.from(document.querySelectorAll('[data-key]')).map(
    e => [e.dataset.key, e.dataset.value ?? e.textContent.trim()])),
  command: (document.getElementById('command-line') || {}).textContent,
  points: Array.from(document.querySelectorAll('#points tr')).map(
    tr => Array.from(tr.children).map(c => c.dataset.value ?? c.textContent.trim())),
  winners: Array.from(document.querySelectorAll('.winner')).map(e => {
    const r = e.getBoundingClientRect(); return {text: e.textContent.trim(), bottom: r.bottom + window.scrollY};
  }),
})"""


def _console_errors(cdp: _Cdp) -> list[str]:
    errs = []
    for e in cdp.events:
        m, p = e.get("method"), e.get("params", {})
        if m == "Runtime.exceptionThrown":
            errs.append(p["exceptionDetails"].get("text", "exception"))
        elif m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
            errs.append(str(p.get("args")))
        elif m == "Log.entryAdded" and p["entry"].get("level") == "error":
            errs.append(p["entry"].get("text", ""))
    return errs


def _check_figures(cdp: _Cdp, state: dict, names) -> None:
    from PIL import Image

    figs = {f["id"]: f for f in state["figures"]}
    for name in names:
        f = figs.get(f"fig-{name}")
        assert f is not None, f"figure {name} missing"
        assert f["loaded"] and f["w"] > 100 and f["h"] > 100, f
        shot = cdp.call("Page.captureScreenshot", format="png", captureBeyondViewport=True,
                        clip={"x": f["x"], "y": f["y"], "width": f["w"], "height": f["h"], "scale": 1})
        px = np.asarray(Image.open(io.BytesIO(base64.b64decode(shot["data"]))).convert("RGB"), dtype=int)
        ink = (px.sum(axis=2) < 600).mean()          # share of pixels clearly darker than white
        colours = len(np.unique(px.reshape(-1, 3), axis=0))
        assert ink > 0.01 and colours > 20, f"figure {name} looks blank: {ink:.4f} ink, {colours} colours"


def test_run_page_in_headless_chromium(browser, run_dir, tmp_path):
    rep = write_report(run_dir, tmp_path / "run.html")
    cdp = browser(rep.path)
    assert _console_errors(cdp) == []
    state = json.loads(cdp.call("Runtime.evaluate", expression=_JS, returnByValue=True)["result"]["value"])
    _check_figures(cdp, state, RUN_FIGURES)
    s = json.loads((run_dir / "summary.json").read_text())
    assert len(state["numbers"]) >= 20
    for key, text in state["numbers"].items():
        want = _at(s, key)
        if isinstance(want, int):
            assert int(text) == want, key
        else:
            assert float(text) == pytest.approx(want, rel=5e-6, abs=1e-12), key
    assert state["command"] == s["command_line"]


def test_sweep_page_in_headless_chromium(browser, sweep_dir, tmp_path):
    rep = write_report(sweep_dir, tmp_path / "sweep.html")
    assert rep.kind == "sweep" and rep.figures == tuple(SWEEP_FIGURES)
    cdp = browser(rep.path)
    assert _console_errors(cdp) == []
    state = json.loads(cdp.call("Runtime.evaluate", expression=_JS, returnByValue=True)["result"]["value"])
    _check_figures(cdp, state, SWEEP_FIGURES)
    man = json.loads((sweep_dir / "sweep.json").read_text())
    assert state["command"] == man["command_line"] and man["command_line"].startswith("specsim sweep --trace ")
    # the load-point table: seed means of the point records' summaries
    from specsim.sweep import load_records, results_frame
    df = results_frame(load_records(sweep_dir))
    head, *rows = state["points"]
    assert len(rows) == 4 and head[:4] == ["curve", "mode", "load", "seeds"]
    for row in rows:
        cell = dict(zip(head, row))
        pts = df[(df.curve == cell["curve"]) & (df.load == float(cell["load"]))]
        assert len(pts) == int(cell["seeds"]) == 2
        for col in ("mean_tps_per_user", "output_throughput_per_gpu", "mean_ttft_ms"):
            assert float(cell[col]) == pytest.approx(pts[col].mean(), rel=5e-6), col
    # the frontier is interactive: every drawn load point carries its values, shown on hover (an SVG <title>)
    fig = next(f for f in state["figures"] if f["id"] == "fig-frontier")
    marks = [m for m in fig["hover"] if m["text"] is not None]
    assert len(marks) == 4 and all(m["w"] > 0 for m in marks)
    for curve, load in (("mtp1", 1), ("mtp1", 4), ("dspark", 1), ("dspark", 4)):
        pts = df[(df.curve == curve) & (df.load == load)]
        want = (f"{curve}, {load} user{'s' if load != 1 else ''}: {pts.mean_tps_per_user.mean():,.1f} tok/s/user, "
                f"{pts.output_throughput_per_gpu.mean():,.0f} tok/s/GPU, mean of 2 seeds")
        assert sum(m["text"] == want for m in marks) == 1, (want, [m["text"] for m in marks])


def test_the_browser_checks_catch_a_blank_figure_and_a_console_error(browser, tmp_path):
    """The checks themselves: a white figure fails the pixel test; a console error is collected."""
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (400, 300), "white").save(buf, format="PNG")
    uri = "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()
    page = tmp_path / "blank.html"
    page.write_text(f'<!DOCTYPE html><html><head><link rel="icon" href="data:,"></head><body>'
                    f'<figure id="fig-blank"><img src="{uri}"></figure>'
                    '<script>console.error("broken")</script></body></html>')
    cdp = browser(page)
    assert any("broken" in e for e in _console_errors(cdp))
    state = json.loads(cdp.call("Runtime.evaluate", expression=_JS, returnByValue=True)["result"]["value"])
    with pytest.raises(AssertionError, match="looks blank"):
        _check_figures(cdp, state, ["blank"])


def _covered_tier(sweep_dir: Path) -> float:
    """A tier inside dspark's frontier range of the fixture sweep (so it has a winner)."""
    from specsim.analysis.frontier import frontiers
    from specsim.sweep import load_records, results_frame, seed_spread

    f = frontiers(seed_spread(results_frame(load_records(sweep_dir))))["dspark"]
    return float(np.floor(np.mean(f.tps_per_user)))


def test_sweep_page_leads_with_the_winner_per_tier_and_full_provenance(sweep_dir, tmp_path):
    from specsim.analysis.frontier import compare
    from specsim.sweep import load_records

    tier = _covered_tier(sweep_dir)
    rep = write_report(sweep_dir, tmp_path / "s.html", tiers=(tier, 10_000.0))
    page = rep.path.read_text()
    recs = load_records(sweep_dir)
    rows = decision_rows(compare(recs, [tier, 10_000.0], "mtp1"))
    assert [r["curve"] is not None for r in rows] == [True, False]          # 10,000 tok/s/user: nobody
    w = rows[0]
    assert f"At {tier:g} tok/s/user: <b>{w['curve']}</b>, {fmt.number(w['throughput_per_gpu'], 0)} tok/s/GPU" in page
    # the answer comes before the frontier figure, which comes before every detail table
    assert page.index('class="winner"') < page.index('id="fig-frontier"') < page.index('<table')
    # provenance: every point's trace slice, every curve's acceptance source
    ids = re.findall(r'<table id="point-sources">(.*?)</table>', page, re.S)[0]
    assert all(r["id"] in ids for r in recs) and ids.count("first 16 requests of") == len(recs)
    curves = re.findall(r'<table id="curve-sources">(.*?)</table>', page, re.S)[0]
    for r in recs:
        assert str(r["provenance"]["acceptance_source"]) in curves
    assert "mtp1" in curves and "dspark" in curves


def test_winner_line_is_on_the_first_screen_in_headless_chromium(browser, sweep_dir, tmp_path):
    tier = _covered_tier(sweep_dir)
    rep = write_report(sweep_dir, tmp_path / "first.html", tiers=(tier,))
    cdp = browser(rep.path, width=1280, height=800)
    assert _console_errors(cdp) == []
    state = json.loads(cdp.call("Runtime.evaluate", expression=_JS, returnByValue=True)["result"]["value"])
    assert state["winners"] and state["winners"][0]["text"].startswith(f"At {tier:g} tok/s/user: ")
    assert "tok/s/GPU" in state["winners"][0]["text"]
    assert all(w["bottom"] <= 800 for w in state["winners"])             # 1280 x 800: no scrolling needed
    fig = next(f for f in state["figures"] if f["id"] == "fig-frontier")
    assert fig["y"] < 800 and fig["loaded"]                                 # the frontier starts on screen too


def test_a_narrow_window_scrolls_the_wide_tables_not_the_page_in_headless_chromium(browser, sweep_dir, tmp_path):
    """At 400 px (a phone) the tier table was cut after its sixth column with no way to reach the rest: each table
    now scrolls inside its own box, and the page itself never scrolls sideways."""
    rep = write_report(sweep_dir, tmp_path / "narrow.html")
    cdp = browser(rep.path, width=400, height=800)
    js = ("JSON.stringify({page: document.documentElement.scrollWidth, boxes: Array.from("
          "document.querySelectorAll('div.scroll')).map(d => [d.scrollWidth, d.clientWidth])})")
    got = json.loads(cdp.call("Runtime.evaluate", expression=js, returnByValue=True)["result"]["value"])
    assert got["page"] <= 400
    assert any(sw > cw for sw, cw in got["boxes"])                  # some table is wider than the window: it scrolls


def test_run_page_goodput_reads_the_windows_throughput_in_closed_loop():
    """The run page's goodput table multiplied the whole run's throughput by the window's requests (a fresh user's
    4,159 against the sweep page's 4,600 for the same point): closed loop reads the window's throughput."""
    import pandas as pd

    from specsim.analysis.report import _run_goodput

    rq = pd.DataFrame({"status": ["completed"] * 4, "arrival_s": [0.0, 1.0, 2.0, 9.0],
                       "done_s": [0.4, 1.5, 4.0, 9.5],      # the window (0.5, 5] measures the two in the middle
                       "tps_per_user": [100.0, 200.0, 300.0, 400.0], "output_tokens": [10, 10, 10, 10]})
    s = {"output_throughput_per_gpu": 1000.0, "window": {"output_throughput_per_gpu": 1200.0},
         "load": {"mode": "closed", "window_start_s": 0.5, "window_end_s": 5.0}}
    table = _run_goodput(s, rq, (150.0,))
    cells = [c["text"] if isinstance(c, dict) else c for c in table["rows"][0]]
    assert any("1,200" in str(c) for c in cells), cells          # both window requests meet 150: all of 1,200
    s_open = {"output_throughput_per_gpu": 1000.0, "load": {"mode": "open"}}
    cells = [c["text"] if isinstance(c, dict) else c for c in _run_goodput(s_open, rq, (150.0,))["rows"][0]]
    assert any("750" in str(c) for c in cells), cells             # 3 of 4 requests' tokens: 0.75 x 1,000


def test_sweep_page_names_its_failed_points():
    """A fresh user's sweep page said only "9 points (8 ok)": it names each failed point and its error."""
    from specsim.analysis.report import _failed_text

    rec = {"config": {"policy": "mtp1", "load": {"mode": "closed", "value": 32}, "seed": 0},
           "error": "a trace long enough for a closed-loop window", "status": "failed"}
    text = _failed_text([rec])
    assert text.startswith("1 points failed and are left out") and "mtp1 at closed load 32, seed 0: a trace long" in text
    assert _failed_text([]) == ""
    assert "(and 2 more)" in _failed_text([rec] * 7)


def test_run_page_of_a_run_without_speculation(tmp_path):
    """A fresh user's `specsim report` of a `--policy none` run crashed (NameError in the acceptance figure, which
    has no step log to draw and names the run's mean acceptance length instead)."""
    out = tmp_path / "none"
    _cli(["run", "--trace", PROD, "--num-requests", "40", "--concurrency", "4", "--policy", "none", "--out", str(out)])
    page = write_report(out).path.read_text()
    assert '<figure id="fig-acceptance"><img' in page
    assert "per-request figures cover the requests that complete inside it" in page
