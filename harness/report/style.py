"""The report's look: each mode's colour, the figures' style, and a figure as a data: URI."""

from __future__ import annotations

import base64
import dataclasses
import io
from typing import Any

import matplotlib
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import to_rgb
from matplotlib.figure import Figure

from harness.core.looks import Looks

# Each mode's colour is its own (declared by the mode: Okabe–Ito and Tol, colour-blind
# safe), the same in every plot and table of a run: the run's looks (harness/core/looks.py,
# passed in), which derive one for a mode nobody described.
HATCHES = ["", "//", "..", "xx", "\\\\", "oo"]

INK, MUTED, GRID = "#1f2328", "#656d76", "#e6e8eb"
RC = {
    "font.family": "DejaVu Sans",
    "font.size": 10,
    "axes.edgecolor": "#c9ced4",
    "axes.labelcolor": INK,
    "axes.titlesize": 11,
    "axes.titleweight": "bold",
    "axes.titlecolor": INK,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "axes.axisbelow": True,
    "grid.color": GRID,
    "grid.linewidth": 0.8,
    "xtick.color": MUTED,
    "ytick.color": MUTED,
    "legend.frameon": False,
    "figure.facecolor": "white",
}
DPI = 144


def mode_color(mode: str, looks: Looks) -> str:
    return looks.colour(mode)


@dataclasses.dataclass(frozen=True)
class Plot:
    title: str
    uri: str           # data:image/png;base64,...
    caption: str = ""
    alt: str = ""


def figure(width: float, height: float) -> Figure:
    fig = Figure(figsize=(width, height), dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def to_uri(fig: Figure) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, facecolor="white")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def styled(fn):
    """Run a plot builder with the report's rcParams in force."""
    def wrapper(*a: Any, **kw: Any):
        with matplotlib.rc_context(RC):
            return fn(*a, **kw)
    wrapper.__name__ = fn.__name__
    wrapper.__doc__ = fn.__doc__
    return wrapper


def tint(color: str, amount: float = 0.85) -> str:
    """A light tint of a colour for table backgrounds."""
    r, g, b = to_rgb(color)
    r, g, b = (1 - amount) * r + amount, (1 - amount) * g + amount, (1 - amount) * b + amount
    return f"#{int(r * 255):02x}{int(g * 255):02x}{int(b * 255):02x}"
