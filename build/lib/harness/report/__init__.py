"""HTML reports: `harness.report.render.render(run_dirs, out_path)` writes one self-contained file.

The package keeps `render` as the module name (`from harness.report import render;
render.render(...)`); plots.py holds the figures, templates/ the Jinja template.
"""
