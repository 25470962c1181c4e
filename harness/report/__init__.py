"""HTML reports: `harness.report.render.render(run_dirs, out_path)` writes one self-contained file.

The package keeps `render` as the module name (`from harness.report import render;
render.render(...)`); facts.py holds the run facts, plots.py the figures, mtu.py the MTU
check's section (and `show`'s MTU block), templates/ the Jinja page and templates/sections/
its blocks (render.SECTIONS, in reading order).
"""
