"""Plots fit for a paper: size and resolution, every text inside the canvas, legends clear of the data,
one colour per algorithm, distinct labels for distinct inputs, the output file named exactly, and
input errors that name their file.  Figures are drawn from made-up numbers: nothing is run."""
import json
import os

import numpy as np
import pytest
from matplotlib.colors import to_hex
from matplotlib.text import Text
from PIL import Image

from fedpne_jax.cli import main
from fedpne_jax.core import registry
from fedpne_jax.experiments import plot as results_plot
from fedpne_jax.experiments.load import SweepResults
from fedpne_jax.paper import figures, studies
from fedpne_jax.plotting import labels as plot_labels
from fedpne_jax.plotting import render as plot_render
from fedpne_jax.plotting import style as plot_style
from tests.support import fake_sweeps

PNG = b"\x89PNG\r\n\x1a\n"
ROUNDS = np.arange(1, 21) * 10


def write_run(folder, name, algorithm, objective="garland", curve=None, **config):
    """A ``fedpne run --output`` file with three seeds of a made-up regret curve."""
    curve = np.sqrt(ROUNDS) if curve is None else np.asarray(curve, float)
    path = os.path.join(str(folder), name)
    with open(path, "w") as fh:
        json.dump({"algorithm": algorithm,
                   "config": {"objective": objective, "num_clients": 10, "horizon": int(ROUNDS[-1]), **config},
                   "checkpoints": ROUNDS.tolist(),
                   "per_seed": {"curves": (curve[None, :] * np.array([[0.9], [1.0], [1.1]])).tolist()}}, fh)
    return path


def six_runs(folder) -> list:
    """Fed-PNE, HCT and BBO on two objectives: the sweep that used to lose the algorithms' colours."""
    return [write_run(folder, f"{a}-{o}.json", a, o, (1 + i + 3 * j) * np.sqrt(ROUNDS))
            for j, o in enumerate(("garland", "doublesine")) for i, a in enumerate(("fedpne", "hct", "bbo"))]


def fake_results(study: str, seed: int) -> SweepResults:
    """A study's full-size SweepResults with made-up numbers: every label and shape a real sweep has."""
    return fake_sweeps.fake_results(study, seed, quick=False)


@pytest.fixture(scope="module")
def results():
    return {s: fake_results(s, i) for i, s in enumerate(studies.STUDIES)}


@pytest.fixture
def rendered():
    """Figures rendered by a test, closed after it."""
    out = []
    yield lambda figure: out.append(plot_render.render(figure)) or out[-1]
    plt = plot_style.pyplot()
    for fig in out:
        plt.close(fig)


def drawn_texts(fig, monkeypatch) -> list:
    """(text, extent in pixels) of every text a draw of the canvas paints.  Tick labels beyond the
    axis limits exist but are never painted, so only painted texts are asked about."""
    drawn = []
    original = Text.draw

    def record(self, renderer):
        original(self, renderer)
        if self.get_visible() and self.get_text():
            drawn.append((self.get_text(), self.get_window_extent(renderer)))

    with monkeypatch.context() as m:
        m.setattr(Text, "draw", record)
        fig.canvas.draw()
    return drawn


def assert_inside_canvas(fig, monkeypatch) -> None:
    texts = drawn_texts(fig, monkeypatch)
    box = fig.bbox
    outside = [(t, tuple(np.round(e.extents))) for t, e in texts
               if e.x0 < box.x0 - 0.5 or e.y0 < box.y0 - 0.5 or e.x1 > box.x1 + 0.5 or e.y1 > box.y1 + 0.5]
    assert texts and not outside, f"outside the {box.width:.0f} x {box.height:.0f} canvas: {outside}"
    tight = fig.get_tightbbox(fig.canvas.get_renderer())          # inches
    width, height = fig.get_size_inches()
    slack = 0.5 / fig.dpi
    assert tight.x0 >= -slack and tight.y0 >= -slack and tight.x1 <= width + slack and tight.y1 <= height + slack


def png_size_and_dpi(path):
    with Image.open(path) as image:
        return image.size, image.info.get("dpi")


def legend_boxes(fig) -> list:
    return [legend.get_window_extent() for legend in fig.legends + [ax.get_legend() for ax in fig.axes]
            if legend is not None]


def data_axes(fig) -> list:
    return [ax for ax in fig.axes if ax.get_lines() or ax.images]


def under(box, ax, samples: int = 400) -> int:
    """How many points along the axes' data lines (sampled finely, in pixels) lie inside ``box``."""
    count = 0
    for line in ax.get_lines():
        xy = line.get_transform().transform(line.get_xydata())
        t = np.linspace(0, len(xy) - 1, samples)
        px = np.interp(t, np.arange(len(xy)), xy[:, 0])
        py = np.interp(t, np.arange(len(xy)), xy[:, 1])
        count += int(((px > box.x0) & (px < box.x1) & (py > box.y0) & (py < box.y1)).sum())
    return count


def line_styles(fig) -> dict:
    """{legend label: (colour, line style)} of the curves drawn."""
    return {line.get_label(): (to_hex(line.get_color()), line.get_linestyle())
            for ax in fig.axes for line in ax.get_lines() if not line.get_label().startswith("_")}


def registry_colour(name) -> str:
    return to_hex(registry.style(name).colour)


# ------------------------------------------------------------------------------------ size and layout

def test_plot_writes_a_paper_sized_png(tmp_path, capsys):
    out = str(tmp_path / "curves.png")
    assert main(["plot", *six_runs(tmp_path), "--out", out]) == 0
    (width, height), dpi = png_size_and_dpi(out)
    assert results_plot.PLOT_SIZE == (7.0, 3.0) and plot_style.DPI >= 150
    # The canvas is exactly the figure's size: 7.0 x 3.0 in at 300 dpi, nothing cropped or padded.
    assert (width, height) == (round(7.0 * plot_style.DPI), round(3.0 * plot_style.DPI))
    assert dpi is not None and dpi[0] == pytest.approx(plot_style.DPI, abs=0.5)


@pytest.mark.parametrize("name", figures.NAMES)
def test_gallery_figures_are_paper_sized_with_every_text_inside(name, results, tmp_path, monkeypatch):
    fig = plot_render.render(figures.build(name, results))
    try:
        out = plot_render.save(fig, str(tmp_path / f"{name}.png"))
        width, height = fig.get_size_inches()
        assert width in (figures.FULL_WIDTH, figures.COLUMN_WIDTH) and 1.5 <= height <= 9.0
        size, dpi = png_size_and_dpi(out)
        assert size == (round(width * fig.dpi), round(height * fig.dpi)) and dpi[0] >= 150
        assert_inside_canvas(fig, monkeypatch)
        # No legend hides data: beside or under the panels, or in a corner where no line runs.
        for box in legend_boxes(fig):
            for ax in data_axes(fig):
                assert under(box, ax) == 0, (name, ax.get_title())
    finally:
        plot_style.pyplot().close(fig)


def test_long_title_labels_and_names_stay_inside_the_canvas(tmp_path, rendered, monkeypatch):
    names = ["a-plugin-algorithm-with-a-name-far-longer-than-any-registered-one-" + c for c in "abcdefg"]
    paths = [write_run(tmp_path, f"{n}.json", n, "garland", (i + 1) * np.sqrt(ROUNDS)) for i, n in enumerate(names)]
    figure = results_plot.results_figure(paths, title="A title that goes on " * 20)
    fig = rendered(figure)
    assert_inside_canvas(fig, monkeypatch)
    assert tuple(fig.get_size_inches()) == results_plot.PLOT_SIZE


def test_a_legend_too_long_for_three_inches_makes_the_figure_taller(tmp_path, rendered, monkeypatch):
    paths = [write_run(tmp_path, f"r{i}.json", "fedpne", "garland", np.sqrt(ROUNDS) + i, c=0.01 * (i + 1))
             for i in range(30)]
    fig = rendered(results_plot.results_figure(paths))
    width, height = fig.get_size_inches()
    assert width == results_plot.PLOT_SIZE[0] and height > results_plot.PLOT_SIZE[1]
    assert_inside_canvas(fig, monkeypatch)


# ----------------------------------------------------------------------------------------------- legends

@pytest.mark.parametrize("count", [5, 6, 9])
def test_legend_is_outside_the_axes_beyond_four_series(count, tmp_path, rendered):
    paths = [write_run(tmp_path, f"r{i}.json", "fedpne", "garland", (i + 1) * np.sqrt(ROUNDS), c=0.1 * (i + 1))
             for i in range(count)]
    fig = rendered(results_plot.results_figure(paths))
    fig.canvas.draw()
    (ax,) = fig.axes
    legend, axes_box = ax.get_legend().get_window_extent(), ax.get_window_extent()
    assert legend.x0 > axes_box.x1 or legend.y1 < axes_box.y0      # beside or under, never over the data area
    assert len(ax.get_legend().get_texts()) == count


@pytest.mark.parametrize("count", [1, 3, 4])
@pytest.mark.parametrize("shape", ["rising", "falling"])
def test_a_short_legend_sits_in_a_free_corner(count, shape, tmp_path, rendered):
    # Rising curves fill the lower right and upper right, falling ones the upper left: the legend
    # must find the corner left free either way.
    base = np.sqrt(ROUNDS) if shape == "rising" else np.sqrt(ROUNDS[-1]) - np.sqrt(ROUNDS) + 1
    paths = [write_run(tmp_path, f"r{i}.json", "hct", "garland", base * (1 + 0.1 * i), c=0.1 * (i + 1))
             for i in range(count)]
    fig = rendered(results_plot.results_figure(paths))
    fig.canvas.draw()
    (ax,) = fig.axes
    legend = ax.get_legend().get_window_extent()
    assert ax.get_window_extent().fully_contains(legend.x0, legend.y0)
    assert ax.get_window_extent().fully_contains(legend.x1, legend.y1)
    assert under(legend, ax) == 0


def test_panels_sharing_a_long_legend_get_one_under_them(results, rendered):
    fig = rendered(figures.build("fig3", results))
    fig.canvas.draw()
    assert [ax.get_legend() for ax in fig.axes] == [None] * len(fig.axes) and len(fig.legends) == 1
    box = fig.legends[0].get_window_extent()
    assert all(box.y1 < ax.get_window_extent().y0 for ax in fig.axes)
    assert [t.get_text() for t in fig.legends[0].get_texts()] == [registry.label(a) for a in studies.COMPARED]


# ------------------------------------------------------------------------------------------------ colours

def test_one_colour_per_algorithm_across_objectives(tmp_path, rendered):
    styles = line_styles(rendered(results_plot.results_figure(six_runs(tmp_path))))
    assert len(styles) == 6
    by_algorithm = {}
    for label, (colour, dash) in styles.items():
        by_algorithm.setdefault(label.split(" ")[0], []).append((colour, dash, "garland" in label))
    assert set(by_algorithm) == {"Fed-PNE", "HCT", "BBO"}
    for name, result_name in [("Fed-PNE", "fedpne"), ("HCT", "hct"), ("BBO", "bbo")]:
        (c1, d1, g1), (c2, d2, g2) = by_algorithm[name]
        # Its registry colour on both objectives; the objectives told apart by the line style.
        assert c1 == c2 == registry_colour(result_name) and d1 != d2 and g1 != g2
    # One line style per objective, whatever the algorithm.
    dashes = {g: {d for entries in by_algorithm.values() for _, d, gg in entries if gg == g} for g in (True, False)}
    assert all(len(d) == 1 for d in dashes.values())


def test_unknown_names_take_palette_colours_in_order_of_appearance(tmp_path, rendered):
    taken = {to_hex(s.colour) for name in registry.NAMES for _, s in registry.get(name).styles if s.colour}
    a = write_run(tmp_path, "a.json", "mystery-a", curve=np.sqrt(ROUNDS))
    b = write_run(tmp_path, "b.json", "mystery-b", curve=2 * np.sqrt(ROUNDS))
    fed = write_run(tmp_path, "f.json", "fedpne", curve=3 * np.sqrt(ROUNDS))
    first = line_styles(rendered(results_plot.results_figure([a, fed, b])))
    second = line_styles(rendered(results_plot.results_figure([b, fed, a])))
    colour = lambda styles, name: next(c for label, (c, _) in styles.items() if label.startswith(name))
    assert colour(first, "Fed-PNE") == colour(second, "Fed-PNE") == registry_colour("fedpne")
    assert colour(first, "mystery-a") != colour(first, "mystery-b")
    assert {colour(first, "mystery-a"), colour(first, "mystery-b")}.isdisjoint(taken)
    # The first unknown name gets the palette's first free colour, whichever name it is.
    assert colour(first, "mystery-a") == colour(second, "mystery-b")


@pytest.mark.parametrize("name, result_name", [("clients", "fedpne"), ("arms", "fed1ucb")])
def test_series_varying_a_parameter_keep_their_algorithm_colour(name, result_name, results, rendered):
    fig = rendered(figures.build(name, results))
    styles = line_styles(fig)
    assert len(styles) >= 4
    assert {c for c, _ in styles.values()} == {registry_colour(result_name)}
    # Told apart by line style and marker instead: no two values look alike.
    looks = {(line.get_label(), line.get_linestyle(), line.get_marker())
             for ax in fig.axes for line in ax.get_lines() if not line.get_label().startswith("_")}
    assert len({look[1:] for look in looks}) == len(looks)


# ------------------------------------------------------------------------------------------------- labels

def legend_texts(fig) -> list:
    return [t.get_text().replace("\n", " ") for ax in fig.axes if ax.get_legend()
            for t in ax.get_legend().get_texts()]


def test_distinct_inputs_get_distinct_labels(tmp_path, rendered):
    by_config = [write_run(tmp_path, f"c{c}.json", "fedpne", curve=np.sqrt(ROUNDS) * c * 10, c=c) for c in (0.1, 0.5)]
    by_file = [write_run(tmp_path, f"{n}.json", "hct", curve=np.sqrt(ROUNDS) * k) for k, n in [(2, "first"), (3, "second")]]
    figure = results_plot.results_figure(by_config + by_file)
    before = [s["label"] for s in figure["panels"][0]["series"]]
    labels = legend_texts(rendered(figure))
    assert len(set(before)) == 2 and len(set(labels)) == 4
    assert any("c=0.1" in label for label in labels) and any("c=0.5" in label for label in labels)
    assert any("first.json" in label for label in labels) and any("second.json" in label for label in labels)
    assert [s["label"] for s in figure["panels"][0]["series"]] == before       # the data are left as given


def test_same_file_twice_still_gets_two_labels(tmp_path, rendered):
    path = write_run(tmp_path, "run.json", "fedpne")
    labels = legend_texts(rendered(results_plot.results_figure([path, path])))
    assert len(set(labels)) == 2 and all("run.json" in label for label in labels)


def test_distinct_labels_prefers_config_values_over_files():
    series = [{"label": "X", "config": {"objective": "garland", "horizon": 100, "c": 0.1}, "source": "/a/r.json"},
              {"label": "X", "config": {"objective": "garland", "horizon": 200, "c": 0.1}, "source": "/b/r.json"},
              {"label": "Y", "config": {}, "source": "/c/r.json"}]
    plot_labels.distinct_labels(series)
    assert [s["label"] for s in series] == ["X (horizon=100)", "X (horizon=200)", "Y"]


# -------------------------------------------------------------------------------------- files and errors

@pytest.mark.parametrize("name, magic", [("noext", PNG), ("figure.v2", PNG), ("figure.pdf", b"%PDF")])
def test_out_writes_exactly_the_named_file(name, magic, tmp_path, capsys):
    out = str(tmp_path / name)
    assert main(["plot", write_run(tmp_path, "run.json", "fedpne"), "--out", out]) == 0
    assert capsys.readouterr().out == f"wrote {out}\n"
    assert sorted(os.listdir(tmp_path)) == sorted(["run.json", name])
    with open(out, "rb") as fh:
        assert fh.read().startswith(magic)


@pytest.mark.parametrize("content, message", [
    (b"hello", "is not a JSON file"),
    (b"\xff\xfe\x00\x81 not text", "is not a JSON file"),
    (b"[1, 2, 3]", "is not a result of 'fedpne run --output'"),
    (b'{"algorithm": "fedpne", "checkpoints": [1], "per_seed": {}}', "is not a result of 'fedpne run --output'"),
])
def test_a_bad_input_file_is_named_in_the_error(content, message, tmp_path, capsys):
    bad = tmp_path / "notjson.json"
    bad.write_bytes(content)
    assert main(["plot", str(bad), "--out", str(tmp_path / "x.png")]) == 2
    err = capsys.readouterr().err
    assert repr(str(bad)) in err and message in err
    assert not (tmp_path / "x.png").exists()


def test_a_sweeps_configurations_get_shades_and_labels_of_what_differs_for_them(tmp_path, rendered, monkeypatch):
    """Nine Fed-PNE configurations of a sweep (c x rho) beside two HCT ones (nu): each Fed-PNE series
    a distinct shade of Fed-PNE's colour, labelled by c and rho only (HCT's nu is not theirs)."""
    from types import SimpleNamespace
    configs = [{"algorithm": "fedpne", "c": c, "rho": rho} for c in (0.1, 0.2, 0.3) for rho in (0.5, 0.6, 0.7)]
    configs += [{"algorithm": "hct", "nu": nu} for nu in (1.0, 2.0)]
    fake = SimpleNamespace(configs=configs, algorithms=[c["algorithm"] for c in configs],
                           done=[np.ones(3, bool)] * len(configs), checkpoints=[ROUNDS] * len(configs),
                           curves=[np.outer(np.arange(1, 4), ROUNDS) * (i + 1) for i in range(len(configs))])
    monkeypatch.setattr(results_plot, "read_finished_part", lambda path: fake)
    styles = line_styles(rendered(results_plot.results_figure([str(tmp_path)])))
    fed = {label: colour for label, (colour, _) in styles.items() if label.startswith("Fed-PNE")}
    assert len(fed) == 9 and len(set(fed.values())) == 9
    assert all("nu=" not in label and "c=" in label and "rho=" in label for label in fed)
    assert all("nu=" in label and "rho=" not in label for label in styles if label.startswith("HCT"))
    from matplotlib.colors import rgb_to_hsv, to_rgb
    hue = rgb_to_hsv(to_rgb(registry_colour("fedpne")))[0]
    gap = lambda a, b: min(abs(a - b), 1 - abs(a - b))          # hue is an angle: red is near 0 and 1
    assert all(gap(rgb_to_hsv(to_rgb(c))[0], hue) < 0.03 for c in fed.values())
