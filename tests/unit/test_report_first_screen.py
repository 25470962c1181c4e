"""The report's first screen holds a result, at desktop and at phone width, in headless Chromium.

The report of the recorded quick run (tests/data/runs/quick) is opened inside an iframe of
the screen's size (Chromium's headless window will not go below 500 px wide, an iframe
will), whose page's own self-check records where its first finding lies; the test fails
when that finding does not end within the first screen. A control report with a
screen-high block above the findings must fail the same check. Screenshots of both sizes
are kept under reports/ for a human to look at.
"""

from __future__ import annotations

import os
import pathlib
import re
import shutil
import subprocess
import tempfile

import pytest

from harness.report.render import render

REPO = pathlib.Path(__file__).resolve().parents[2]
REPORTS = REPO / "reports"
DATA = REPO / "tests" / "data" / "runs" / "quick"
SCREENS = {"desktop": (1400, 900), "phone": (390, 844)}
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars"]

FRAME = """<!DOCTYPE html><html><body style="margin:0">
<iframe id="f" src="{src}" width="{w}" height="{h}" style="border:0"></iframe>
<script>
  document.getElementById("f").addEventListener("load", function () {{
    var b = this.contentDocument.body;
    for (var i = 0; i < b.attributes.length; i++) document.body.setAttribute(b.attributes[i].name, b.attributes[i].value);
  }});
</script></body></html>
"""


def _chromium(args: list[str], tmp: pathlib.Path) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory(dir=tmp) as profile:
        return subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={profile}", *args], capture_output=True,
                              text=True, timeout=120, env={**os.environ, "HOME": str(tmp)})


def first_finding(report: pathlib.Path, size: tuple[int, int], tmp: pathlib.Path) -> dict[str, str]:
    """The report's self-check attributes when shown on a screen of `size`."""
    frame = tmp / f"{report.stem}-frame-{size[0]}.html"
    frame.write_text(FRAME.format(src=report.resolve().as_uri(), w=size[0], h=size[1]))
    r = _chromium(["--allow-file-access-from-files", "--run-all-compositor-stages-before-draw",
                   "--virtual-time-budget=5000", "--window-size=1600,1000", "--dump-dom", frame.as_uri()], tmp)
    assert r.returncode == 0, r.stderr[-2000:]
    body = re.search(r"<body[^>]*>", r.stdout)
    assert body, r.stdout[:500]
    return dict(re.findall(r'(data-[\w-]+)="([^"]*)"', body.group(0)))


def on_first_screen(attrs: dict[str, str], size: tuple[int, int]) -> bool:
    assert attrs.get("data-viewport") == f"{size[0]}x{size[1]}", attrs
    assert attrs.get("data-errors") == "0", attrs
    return 0 < int(attrs["data-findings-top"]) < int(attrs["data-findings-bottom"]) <= size[1]


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install -y chromium)")
def test_first_screen_states_the_findings(tmp_path):
    REPORTS.mkdir(exist_ok=True)
    report = render([DATA], REPORTS / "first_screen.html")
    control = tmp_path / "pushed_down.html"
    control.write_text(report.read_text().replace('<main class="wrap">',
                                                  '<main class="wrap"><div style="height:1000px"></div>', 1))
    for name, size in SCREENS.items():
        attrs = first_finding(report, size, tmp_path)
        assert on_first_screen(attrs, size), (name, attrs)
        assert attrs["data-images-ok"] == attrs["data-images-total"] != "0", attrs
        assert not on_first_screen(first_finding(control, size, tmp_path), size), name   # the check can fail

        shot = REPORTS / f"first_screen_{name}.png"
        shot.unlink(missing_ok=True)
        r = _chromium([f"--screenshot={shot}", f"--window-size={size[0]},{size[1]}", report.as_uri()], tmp_path)
        assert r.returncode == 0 and shot.is_file(), r.stderr[-2000:]
        from PIL import Image
        with Image.open(shot) as im:
            colors = im.convert("RGB").resize((size[0] // 10, size[1] // 10)).getcolors(maxcolors=200_000)
            assert colors is not None and len(colors) > 50, "screenshot looks blank"
