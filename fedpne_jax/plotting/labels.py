"""Legend labels and the measure of text: series whose labels coincide get what differs between them
appended (config values, else the file name), and a long title or label is wrapped at the width its
figure gives it, as matplotlib will render it.
"""
from __future__ import annotations

import os
import re

# Config keys first in a label or a table, in this order; the others follow by name.
LABEL_ORDER = ["objective", "algorithm", "num_clients", "horizon"]


def _value(v) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


def distinct_labels(series: list) -> None:
    """Series with one label get what differs between them appended, in place: the first config values
    (objective, algorithm, M, T first) that tell them apart, at most three; else their files' names."""
    groups: dict = {}
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
