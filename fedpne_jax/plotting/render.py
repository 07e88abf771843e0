"""A figure's layout, legends and file.

:func:`layout` sizes a figure from its data alone (gallery figures are ``row_height``, about 2 in,
per row of panels plus room for the title and a shared legend); :func:`render` draws it as a
matplotlib Figure, :func:`draw` into a file.  The canvas is exactly width x height x DPI pixels
(constrained layout keeps every text inside it).  Legends with more than four entries go outside
the data area (below the panels when every panel has the same entries, else to the right of their
axes); shorter ones go in the corner of the axes that covers the least data.
"""
from __future__ import annotations

import math
import os

import numpy as np

from fedpne_jax.plotting.labels import distinct_labels, text_width, wrap
from fedpne_jax.plotting.style import CORNERS, DPI, FONT, FULL_WIDTH, OUTSIDE, ROW_HEIGHT, pyplot, styles


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
            assert best is not None           # every group has an axes and there are corners
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
