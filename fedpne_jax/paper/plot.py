"""Drawing figures with matplotlib (the ``plot`` extra): one style for every figure.

A figure is data first (:mod:`fedpne_jax.paper.figures` builds it as panels of series); this module
only draws it, sized for a two-column paper:

* width: :data:`FULL_WIDTH` = 7.0 in (a ``figure*`` across both columns) unless the figure asks for
  :data:`COLUMN_WIDTH` = 3.4 in (one column); gallery figures are ``row_height`` (about 2 in) per row
  of panels plus room for the title and a shared legend; ``fedpne plot`` is 7.0 x 3.0 in, taller only
  when its legend needs more lines than that holds;
* :data:`DPI` = 300 dots per inch; the canvas is exactly width x height x DPI pixels (constrained
  layout keeps every text inside it: no tight bounding box that would change the size);
* one colour per algorithm, always: the registry's (:func:`fedpne_jax.core.registry.style`), and for
  a name the registry does not know, the next colour of :data:`PALETTE` that no algorithm uses.
  Several series of one algorithm differ by line style and marker: by objective when one axes holds
  several objectives, else by configuration (M, K, a grid value);
* legends with more than four entries go outside the data area (below the panels when every panel
  has the same entries, else to the right of their axes); shorter ones go in the corner of the axes
  that covers the least data;
* labels are distinct: series whose labels coincide get what differs between them appended (config
  values, else the file name).

``fedpne plot RESULTS...`` draws regret curves of any ``fedpne run --output`` JSON files and sweep
folders on one axes (:func:`plot_results`).
"""
from __future__ import annotations

import json
import math
import os
import re

import numpy as np

from fedpne_jax.core import registry
from fedpne_jax.core.errors import MissingExtra
from fedpne_jax.experiments.load import LABEL_ORDER, input_kind, load_sweep
from fedpne_jax.paper.figures import FULL_WIDTH, stats

DPI = 300
PLOT_SIZE = (FULL_WIDTH, 3.0)          # fedpne plot: inches
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


# ------------------------------------------------------------------------------------------------ styles

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
    colours, variants, out = {}, {}, {}
    unknown = 0
    # How many configurations each algorithm shows in one panel: their colours are shades of its own.
    count = {}
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
        within = {}
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
    return to_hex(np.clip(mixed, 0, 1))


def _markers(first: str) -> list:
    return [first] + [m for m in MARKERS if m != first]


# ------------------------------------------------------------------------------------------------ labels

def _value(v) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


def distinct_labels(series: list) -> None:
    """Series with one label get what differs between them appended, in place: the first config values
    (objective, algorithm, M, T first) that tell them apart, at most three; else their files' names."""
    groups = {}
    for s in series:
        groups.setdefault(s["label"], []).append(s)
    for label, group in groups.items():
        if len(group) < 2:
            continue
        configs = [s.get("config") or {} for s in group]
        keys = list(dict.fromkeys([k for k in LABEL_ORDER if any(k in c for c in configs)]
                                  + sorted({k for c in configs for k in c})))
        differing = [k for k in keys if len({repr(c.get(k)) for c in configs}) > 1]
        chosen, extras = [], None
        for k in differing[:3]:
            chosen.append(k)
            extras = [", ".join(f"{k}={_value(c.get(k))}" for k in chosen) for c in configs]
            if len(set(extras)) == len(group):
                break
        if extras is None or len(set(extras)) < len(group):
            extras = _source_names([s.get("source") for s in group])
        for s, extra in zip(group, extras):
            s["label"] = f"{label[:-1]}, {extra})" if label.endswith(")") else f"{label} ({extra})"


def _source_names(sources: list) -> list:
    """The shortest names that tell ``sources`` apart: file names, else paths, else numbered file names
    (the same file given twice)."""
    names = [os.path.basename(os.path.normpath(p)) if p else "" for p in sources]
    if len(set(names)) < len(names) and len(set(sources)) == len(sources):
        names = [p or "" for p in sources]
    if len(set(names)) < len(names):
        names = [f"{n} #{i + 1}".strip() for i, n in enumerate(names)]
    return names


_GLUED = re.compile(r" ([=±≥≤<>×−+]) ")
_measure = None


def text_width(text: str, fontsize: float) -> float:
    """Width in points of one line of ``text`` as matplotlib renders it at ``fontsize``."""
    global _measure
    from matplotlib.backends.backend_agg import RendererAgg
    from matplotlib.cbook import is_math_text
    from matplotlib.font_manager import FontProperties
    if _measure is None:
        _measure = RendererAgg(10, 10, 72)          # at 72 dpi a pixel is a point
    width, _, _ = _measure.get_text_width_height_descent(text, FontProperties(size=fontsize),
                                                         ismath=is_math_text(text))
    return width


def wrap(text: str, width_in: float, fontsize: float) -> str:
    """``text`` broken at spaces into lines no wider than ``width_in`` inches at ``fontsize`` points
    (a longer single word stays whole); a $math$ span and "a = b", "± 1" are never broken."""
    limit = width_in * 72 * 0.97          # a little slack: hinting may differ from this measurement
    parts = text.split("$")
    text = "$".join(p.replace(" ", "\0") if i % 2 else _GLUED.sub("\0\\1\0", p) for i, p in enumerate(parts))
    lines = []
    for paragraph in text.split("\n"):
        line = ""
        for word in paragraph.split(" "):
            candidate = f"{line} {word}" if line else word
            if line and text_width(candidate.replace("\0", " "), fontsize) > limit:
                lines.append(line)
                line = word
            else:
                line = candidate
        lines.append(line)
    return "\n".join(lines).replace("\0", " ")


# ----------------------------------------------------------------------------------------------- drawing

def _curves(ax, panel, style):
    for s in panel["series"]:
        x, mean, spread = np.asarray(s["x"], float), np.asarray(s["mean"], float), np.asarray(s[panel["band"]], float)
        colour, ls, marker = style[id(s)]
        ax.plot(x, mean, color=colour, ls=ls, marker=marker, ms=3, markevery=max(1, len(x) // 6), lw=1.2,
                label=s["label"])
        ax.fill_between(x, mean - spread, mean + spread, color=colour, alpha=0.15, lw=0)


def _points(ax, panel, style):
    for s in panel["series"]:
        colour, ls, marker = style[id(s)]
        ax.errorbar(np.asarray(s["x"], float), np.asarray(s["mean"], float), yerr=np.asarray(s[panel["band"]], float),
                    color=colour, ls=ls, marker=marker, ms=3.5, lw=1.2, capsize=2, label=s["label"])
    for line in panel.get("lines", []):
        ax.plot(line["x"], line["y"], color="black", ls=line.get("style", "--"), lw=0.9, label=line["label"])


def _heatmap(ax, panel, style):
    rows = panel["series"]                                  # one series per y value, x along each
    x = rows[0]["x"]
    grid = np.array([r["mean"] for r in rows], float)
    image = ax.imshow(grid, origin=panel.get("origin", "lower"), aspect="auto", cmap=panel.get("cmap", "viridis_r"),
                      **({"vmin": panel["range"][0], "vmax": panel["range"][1]} if panel.get("range") else {}))
    ax.set_xticks(range(len(x)), panel.get("xticklabels") or [f"{v:g}" for v in x],
                  rotation=panel.get("xrotation", 0))
    ax.set_yticks(range(len(rows)), [r["label"] for r in rows])
    best = np.unravel_index(np.nanargmin(grid), grid.shape) if panel.get("mark_best", True) else None
    lo, hi = np.nanmin(grid), np.nanmax(grid)
    for (i, j), value in np.ndenumerate(grid):
        # viridis_r is light at low values, a diverging map in the middle: dark text there, light text
        # on the dark cells.
        if panel.get("diverging"):
            light = abs(value - 0.5 * (lo + hi)) <= 0.3 * (hi - lo)
        else:
            light = (value - lo) <= 0.5 * (hi - lo)
        ax.text(j, i, f"{value:.0f}" if abs(value) >= 100 else f"{value:.3g}", ha="center", va="center",
                fontsize=FONT["cell"], color="red" if (i, j) == best else ("black" if light else "white"),
                fontweight="bold" if (i, j) == best else None)
    return image


DRAW = {"curves": _curves, "points": _points, "heatmap": _heatmap}


def _entries(panel) -> list:
    if panel["kind"] == "heatmap":
        return []
    return [s["label"] for s in panel["series"]] + [line["label"] for line in panel.get("lines", [])]


def _legend_lines(labels, width_in) -> int:
    return sum(wrap(label, width_in, FONT["legend"]).count("\n") + 1 for label in labels)


def _text_height(lines: int, fontsize: float) -> float:
    """Inches a legend of ``lines`` text lines takes, frame and padding included."""
    return lines * fontsize * 1.45 / 72 + 0.2


def layout(figure: dict, columns: int | None = None) -> dict:
    """Size and legend placement of a figure, from its data alone: ``width`` x ``height`` inches,
    ``below`` (a legend shared by every panel, under them) or per-panel legends ``right`` inches wide
    beside their axes when long, in a corner when short."""
    panels = figure["panels"]
    columns = columns or figure.get("columns") or min(len(panels), 4)
    rows = math.ceil(len(panels) / columns)
    width = figure.get("width", FULL_WIDTH)
    with_entries = [p for p in panels if _entries(p)]
    shared = len(with_entries) > 1 and all(_entries(p) == _entries(with_entries[0]) for p in with_entries)
    right = 0.34 * width / columns                     # inches a legend beside its axes may take
    title = wrap(figure.get("title") or "", width - 0.2, FONT["suptitle"])
    below = None
    if shared and len(_entries(with_entries[0])) > OUTSIDE:
        labels = _entries(with_entries[0])
        # Each column: the longest label, its handle (2 em), the pad (0.8 em) and the spacing (2 em).
        entry = (max(text_width(label, FONT["legend"]) for label in labels) + 4.8 * FONT["legend"]) / 72
        ncol = max(1, min(len(labels), int((width - 0.3) // entry)))
        below = {"ncol": ncol, "rows": math.ceil(len(labels) / ncol)}
    base = row_height = figure.get("row_height", ROW_HEIGHT)
    if not shared:
        # A legend beside its axes is as tall as the row at most: rows grow to hold the longest.
        row_height = max([base] + [_text_height(_legend_lines(_entries(p), right - 0.35), FONT["legend"]) + 0.4
                                   for p in with_entries if len(_entries(p)) > OUTSIDE])
    height = figure.get("height") or (rows * base + (title.count("\n") + 1.5) * FONT["suptitle"] * 1.4 / 72 * bool(title)
                                      + (_text_height(below["rows"], FONT["legend"]) if below else 0.0))
    height += rows * (row_height - base)
    # Whole quarter inches: exact in binary, so the canvas is exactly height x dpi pixels (at 300 dpi).
    height = math.ceil(height * 4 - 1e-9) / 4
    return {"columns": columns, "rows": rows, "width": width, "height": height, "row_height": row_height,
            "title": title, "shared": shared, "below": below, "right": right}


def render(figure: dict, columns: int | None = None):
    """A figure (the dict of :func:`fedpne_jax.paper.figures.build`) as a matplotlib Figure, laid out
    and with its legends placed (see the module's docstring for the conventions)."""
    plt = pyplot()
    # Labels are made distinct on copies: the caller's data (already written as JSON) stay as they are.
    panels = [dict(p, series=[dict(s) for s in p["series"]]) for p in figure["panels"]]
    for panel in panels:
        distinct_labels(panel["series"])
    figure = dict(figure, panels=panels)
    plan = layout(figure, columns)
    style = styles(panels)
    fig, axes = plt.subplots(plan["rows"], plan["columns"], figsize=(plan["width"], plan["height"]), squeeze=False,
                             dpi=max(figure.get("dpi", DPI), 150), layout="constrained")
    cell_width = plan["width"] / plan["columns"]
    for ax, panel in zip(axes.flat, panels):
        image = DRAW[panel["kind"]](ax, panel, style)
        beside = not plan["shared"] and len(_entries(panel)) > OUTSIDE
        plot_width = cell_width - 0.55 - (plan["right"] if beside else 0.0) - (0.8 if image is not None else 0.0)
        plot_height = plan["row_height"] - 0.8
        ax.set_title(wrap(panel["title"], cell_width - 0.1, FONT["title"]), fontsize=FONT["title"])
        ax.set_xlabel(wrap(panel["xlabel"], plot_width, FONT["label"]), fontsize=FONT["label"])
        ax.set_ylabel(wrap(panel["ylabel"], plot_height, FONT["label"]), fontsize=FONT["label"])
        ax.tick_params(which="both", labelsize=FONT["tick"])
        for axis in (ax.xaxis, ax.yaxis):
            axis.get_offset_text().set_fontsize(FONT["tick"])
        if image is not None:
            bar = fig.colorbar(image, ax=ax)
            bar.set_label(wrap(panel.get("colorbar", ""), plot_height, FONT["label"]), fontsize=FONT["label"])
            bar.ax.tick_params(labelsize=FONT["tick"])
        else:
            xscale = panel.get("xscale", "linear")
            ax.set_xscale(xscale, **({"linthresh": panel.get("linthresh", 1.0)} if xscale == "symlog" else {}))
            if panel.get("xticks"):
                ax.set_xticks(panel["xticks"], [f"{v:g}" for v in panel["xticks"]])
            ax.set_yscale(panel.get("yscale", "linear"))
            if panel.get("ylim"):
                ax.set_ylim(*panel["ylim"])
            ax.grid(alpha=0.3, lw=0.5, which="both" if panel.get("xscale") == "log" else "major")
    for ax in list(axes.flat)[len(panels):]:
        ax.axis("off")
    if plan["title"]:
        fig.suptitle(plan["title"], fontsize=FONT["suptitle"])
    _legends(fig, [ax for ax, p in zip(axes.flat, panels) if _entries(p)], plan)
    return fig


def _legends(fig, axes, plan) -> None:
    if not axes:
        return
    if plan["below"]:
        _below(fig, axes[0], plan)
        return
    inside = []
    for ax in axes:
        if len(ax.get_legend_handles_labels()[1]) > OUTSIDE:
            _beside(ax, plan)
        else:
            inside.append(ax)
    # A legend every panel shares is drawn once, where it hides the least data of any panel.
    pending = [inside] if plan["shared"] and inside else [[ax] for ax in inside]
    while pending:
        fig.draw_without_rendering()   # the layout fixes the axes' sizes and limits the corners are judged on
        renderer = fig.canvas.get_renderer()
        placed, moved = [], False
        for group in pending:
            best = None
            for ax in group:
                handles, labels = ax.get_legend_handles_labels()
                ink = _ink(ax)
                wrapped = [wrap(label, 0.6 * ax.get_window_extent().width / fig.dpi, FONT["legend"])
                           for label in labels]
                for loc in CORNERS:
                    legend = ax.legend(handles, wrapped, loc=loc, fontsize=FONT["legend"])
                    cost = _covered(ink, legend.get_window_extent(renderer))
                    legend.remove()
                    if best is None or cost < best[0]:
                        best = (cost, ax, loc, handles, wrapped)
            if best[0] > 0:
                # No corner is free: outside the data area, like a long legend.  That shrinks the
                # axes, so the corners of the others are judged again.
                _below(fig, group[0], plan) if plan["shared"] else _beside(group[0], plan)
                moved = True
            else:
                placed.append((group, best))
        if not moved:
            for _, (_, ax, loc, handles, wrapped) in placed:
                ax.legend(handles, wrapped, loc=loc, fontsize=FONT["legend"])
            return
        pending = [group for group, _ in placed]


def _below(fig, ax, plan) -> None:
    """The legend of ``ax`` (which every panel shares) under all the panels."""
    handles, labels = ax.get_legend_handles_labels()
    ncol = plan["below"]["ncol"] if plan["below"] else len(labels)
    fig.legend(handles, [wrap(label, plan["width"] - 0.3, FONT["legend"]) for label in labels],
               loc="outside lower center", ncol=ncol, fontsize=FONT["legend"], frameon=False)


def _beside(ax, plan) -> None:
    """The legend of ``ax`` to the right of it."""
    handles, labels = ax.get_legend_handles_labels()
    ax.legend(handles, [wrap(label, plan["right"] - 0.35, FONT["legend"]) for label in labels], loc="upper left",
              bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0, fontsize=FONT["legend"])


def _ink(ax):
    """What an axes shows, in display units: points every few pixels along its lines and the edges of
    its bands and error bars (a legend over a long straight segment hides it though no vertex lies
    under the legend), and the bands' outlines."""
    points, areas = [], []
    for line in ax.get_lines():
        points.append(_densify(line.get_transform().transform(line.get_xydata())))
    for collection in ax.collections:
        transform = collection.get_transform()
        for path in collection.get_paths():
            path = transform.transform_path(path)
            points.append(_densify(path.vertices))
            if len(path.vertices) > 2:
                areas.append(path)
    return (np.concatenate(points) if points else np.zeros((0, 2))), areas


def _covered(ink, box) -> float:
    """How much of the ink a legend at ``box`` (display units) would hide: sampled points under it,
    and how much of it lies on a band."""
    points, areas = ink
    hits = ((points[:, 0] >= box.x0) & (points[:, 0] <= box.x1) & (points[:, 1] >= box.y0)
            & (points[:, 1] <= box.y1)).sum()
    grid = np.stack(np.meshgrid(np.linspace(box.x0, box.x1, 8), np.linspace(box.y0, box.y1, 6)), -1).reshape(-1, 2)
    return float(hits + sum(int(area.contains_points(grid).sum()) for area in areas))


def _densify(xy, step: float = 3.0):
    """Points at most ``step`` pixels apart along the polyline ``xy``."""
    xy = np.asarray(xy, float)
    xy = xy[np.all(np.isfinite(xy), axis=1)]
    if len(xy) < 2:
        return xy.reshape(-1, 2)
    a, b = xy[:-1], xy[1:]
    n = np.clip(np.ceil(np.hypot(*(b - a).T) / step), 1, 2000).astype(int)
    segment = np.repeat(np.arange(len(n)), n)
    t = (np.arange(n.sum()) - np.repeat(np.cumsum(n) - n, n) + 1) / np.repeat(n, n)
    return np.concatenate([xy[:1], a[segment] + t[:, None] * (b - a)[segment]])


def save(fig, path: str) -> str:
    """Write ``fig`` to exactly ``path``: in the format its extension names, PNG when it names none
    matplotlib writes (``--out figure`` writes a PNG called ``figure``, not ``figure.png``)."""
    extension = os.path.splitext(path)[1][1:].lower()
    known = fig.canvas.get_supported_filetypes()
    fig.savefig(path, format=extension if extension in known else "png", dpi=fig.dpi)
    return path


def draw(figure: dict, path: str, columns: int | None = None) -> str:
    """Draw a figure (the dict of :func:`fedpne_jax.paper.figures.build`) into the file ``path`` (PNG
    unless its extension names another format)."""
    plt = pyplot()
    fig = render(figure, columns)
    try:
        return save(fig, path)
    finally:
        plt.close(fig)


# ----------------------------------------------------------------------------------------- fedpne plot

def _read_json(path: str):
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except ValueError as err:          # json.JSONDecodeError and UnicodeDecodeError alike
        raise ValueError(f"{path!r} is not a JSON file ({err}); give a 'fedpne run --output' file or a sweep "
                         f"folder") from None


def _run_series(path: str) -> list[dict]:
    """Series of a ``fedpne run --output`` JSON file."""
    data = _read_json(path)
    if not isinstance(data, dict) or not all(k in data for k in ("checkpoints", "per_seed", "algorithm", "config")) \
            or not isinstance(data["per_seed"], dict) or "curves" not in data["per_seed"]:
        raise ValueError(f"{path!r} is not a result of 'fedpne run --output' (no checkpoints/per_seed)")
    curves = np.asarray(data["per_seed"]["curves"], float)
    algorithm = data["algorithm"]
    config = dict(data["config"], algorithm=algorithm)
    label = registry.label(algorithm) + (f" M={config['num_clients']}" if config.get("num_clients") else "")
    objective = config.get("objective")
    return [_series(algorithm, label + (f" ({objective})" if objective else ""), data["checkpoints"], curves,
                    config, path)]


def _sweep_series(path: str) -> list[dict]:
    res = load_sweep(path, allow_partial=True)
    out = []
    # A series is labelled by the parameters that differ between the configurations of its own
    # algorithm (and the objective's, which differ between all): not by what varies for another.
    by_algorithm: dict = {}
    for i, labels in enumerate(res.configs):
        by_algorithm.setdefault(res.algorithms[i] or labels["algorithm"], []).append(labels)
    varied = {name: [k for k in sorted({k for c in configs for k in c})
                     if k != "algorithm" and len({repr(c.get(k)) for c in configs}) > 1]
              for name, configs in by_algorithm.items()}
    for i, labels in enumerate(res.configs):
        done = res.done[i]
        if not done.any():
            continue
        algorithm = res.algorithms[i] or labels["algorithm"]
        extra = ", ".join(f"{k}={labels[k]}" for k in varied[algorithm] if labels.get(k) is not None)
        out.append(_series(algorithm, registry.label(algorithm) + (f" ({extra})" if extra else ""),
                           res.checkpoints[i], res.curves[i][done], dict(labels, algorithm=algorithm), path))
    return out


def _series(key, label, x, curves, config, source) -> dict:
    mean, std, err, n = stats(curves)
    return {"key": key, "label": label, "x": np.asarray(x).tolist(), "mean": mean.tolist(), "std": std.tolist(),
            "stderr": err.tolist(), "runs": int(n), "config": config, "source": source}


def results_figure(paths, title: str | None = None, band: str = "std", xscale: str = "linear",
                   yscale: str = "linear") -> dict:
    """The figure ``fedpne plot`` draws: one axes of regret curves (mean and a band of ±1 ``band``) of
    run JSON files and sweep folders, :data:`PLOT_SIZE` inches."""
    if band not in ("std", "stderr"):
        raise ValueError(f"band must be 'std' or 'stderr', got {band!r}")
    series = []
    for path in paths:
        series += _sweep_series(path) if input_kind(path) == "sweep" else _run_series(path)
    if not series:
        raise ValueError("nothing to plot: the results hold no finished runs")
    panel = {"kind": "curves", "band": band, "title": "", "xlabel": "round t",
             "ylabel": "cumulative regret (per client for federated algorithms)", "xscale": xscale, "yscale": yscale,
             "series": series, "shades": True}
    figure = {"title": title or "Cumulative regret (mean ± 1 " + ("std" if band == "std" else "s.e.") + ")",
              "panels": [panel], "columns": 1, "width": PLOT_SIZE[0], "height": PLOT_SIZE[1],
              "row_height": PLOT_SIZE[1] - 0.3}
    return figure


def plot_results(paths, out: str, title: str | None = None, band: str = "std", xscale: str = "linear",
                 yscale: str = "linear") -> str:
    """Regret curves (mean and a band of ±1 ``band``: std or stderr) of run JSON files and sweep
    folders on one axes, written to exactly ``out`` (PNG unless its extension names another format)."""
    return draw(results_figure(paths, title, band, xscale, yscale), out)
