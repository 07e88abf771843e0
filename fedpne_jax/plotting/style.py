"""Sizes, colours, line styles and markers: one style for every figure, sized for a two-column paper.

* width: :data:`FULL_WIDTH` = 7.0 in (a ``figure*`` across both columns) unless the figure asks for
  :data:`COLUMN_WIDTH` = 3.4 in (one column); :data:`DPI` = 300 dots per inch;
* one colour per algorithm, always: the registry's (:func:`fedpne_jax.core.registry.style`), and for
  a name the registry does not know, the next colour of :data:`PALETTE` that no algorithm uses.
  Several series of one algorithm differ by line style and marker: by objective when one axes holds
  several objectives, else by configuration (M, K, a grid value).
"""
from __future__ import annotations

import numpy as np

from fedpne_jax.core import registry
from fedpne_jax.core.errors import MissingExtra

# Figure widths of a two-column paper, in inches: a figure* across the page, or one column.
FULL_WIDTH = 7.0
COLUMN_WIDTH = 3.4
DPI = 300
ROW_HEIGHT = 2.1                       # inches per row of panels when a figure does not say
OUTSIDE = 4                            # legends with more entries than this leave the data area
# Okabe-Ito's colour-blind-safe qualitative palette; colours the registry gives an algorithm are
# dropped at use, so a name the registry does not know never looks like an algorithm it does.
PALETTE = ("#E69F00", "#56B4E9", "#009E73", "#0072B2", "#D55E00", "#CC79A7", "#F0E442", "#000000")
LINESTYLES = ("-", "--", ":", "-.", (0, (5, 1, 1, 1, 1, 1)), (0, (1, 3)))
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "<", ">", "h")
FONT = {"title": 8, "label": 8, "tick": 7, "legend": 7, "suptitle": 9, "cell": 6}
CORNERS = ("upper left", "upper right", "lower right", "lower left")


def pyplot():
    """matplotlib.pyplot with a file-only backend, or an error that says how to install it."""
    try:
        import matplotlib
    except ImportError:
        raise MissingExtra('plots need matplotlib: pip install "fedpne-jax[plot]" (or pip install matplotlib)') \
            from None
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt
    return plt


def algorithm_of(series: dict):
    """The result name a series belongs to: its key, else its configuration's algorithm (curves that
    vary a parameter carry no key so the summary does not rank them, but still belong to one)."""
    return series.get("key") or (series.get("config") or {}).get("algorithm")


def _objective_of(series: dict):
    return (series.get("config") or {}).get("objective")


def _registered(name):
    """The registry's style of a result name when it gives a colour, else None."""
    s = registry.style(name) if isinstance(name, str) else None
    return s if s is not None and s.colour else None


def _hex(colour: str) -> str:
    from matplotlib.colors import to_hex
    return to_hex(colour).lower()


def _registry_colours() -> set:
    out = set()
    for name in registry.NAMES:
        for _, s in registry.get(name).styles:
            if s.colour:
                out.add(_hex(s.colour))
    return out


def styles(panels) -> dict:
    """{id(series): (colour, line style, marker)} for every series of ``panels``, consistent across the
    figure: one colour per algorithm; a label keeps its style in every panel.  A panel with ``shades``
    (``fedpne plot``'s) gives an algorithm's configurations shades of its colour as well."""
    taken = _registry_colours()
    free = [c for c in PALETTE if _hex(c) not in taken]
    colours: dict = {}
    variants: dict = {}
    out: dict = {}
    unknown = 0
    # How many configurations each algorithm shows in one panel: their colours are shades of its own.
    count: dict = {}
    for panel in panels:
        per: dict = {}
        for s in panel["series"]:
            per.setdefault(algorithm_of(s) or s["label"], set()).add(s["label"])
        for name, labels in per.items():
            count[name] = max(count.get(name, 0), len(labels))
    for panel in panels:
        series = panel["series"]
        objectives = list(dict.fromkeys(_objective_of(s) for s in series))
        by_objective = len(objectives) > 1
        within: dict = {}
        for s in series:
            name = algorithm_of(s) or s["label"]
            known = _registered(name)
            if name not in colours:
                if known is not None:
                    colours[name] = known.colour
                else:
                    colours[name], unknown = free[unknown % len(free)], unknown + 1
            markers = _markers(known.marker if known is not None and known.marker else "o")
            if by_objective:
                # Line style tells the objective, marker the configuration within it.
                labels = within.setdefault((name, _objective_of(s)), [])
                if s["label"] not in labels:
                    labels.append(s["label"])
                style = LINESTYLES[objectives.index(_objective_of(s)) % len(LINESTYLES)]
                marker = markers[labels.index(s["label"]) % len(markers)]
            else:
                labels = variants.setdefault(name, [])
                if s["label"] not in labels:
                    labels.append(s["label"])
                k = labels.index(s["label"])
                style, marker = LINESTYLES[k % len(LINESTYLES)], markers[k % len(markers)]
                if panel.get("shades"):
                    out[id(s)] = (shade(colours[name], k, count[name]), style, marker)
                    continue
            out[id(s)] = (colours[name], style, marker)
    return out


def shade(colour: str, k: int, n: int) -> str:
    """The k-th of n shades of ``colour``, from darker to lighter (the colour itself when n = 1): nine
    configurations of one algorithm would otherwise share one colour, told apart by line style alone."""
    if n <= 1:
        return colour
    from matplotlib.colors import to_hex, to_rgb
    rgb = np.asarray(to_rgb(colour))
    t = -0.45 + 0.9 * k / (n - 1)                # < 0 towards black, > 0 towards white
    mixed = rgb * (1 + t) if t < 0 else rgb + (1 - rgb) * t
    r, g, b = np.clip(mixed, 0, 1)
    return to_hex((float(r), float(g), float(b)))


def _markers(first: str) -> list:
    return [first] + [m for m in MARKERS if m != first]
