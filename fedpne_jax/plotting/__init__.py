"""Drawing figures with matplotlib (the ``plot`` extra), one style for every figure: the paper's
(:mod:`fedpne_jax.paper.figures`), the benchmark report's (:mod:`fedpne_jax.experiments.report`)
and ``fedpne plot``'s (:mod:`fedpne_jax.experiments.plot`).

A figure is data first: a dict of panels of series, written as JSON next to its picture.
:mod:`~fedpne_jax.plotting.series` holds what a series' numbers are (mean, std and standard error
over runs), :mod:`~fedpne_jax.plotting.style` the sizes, colours, line styles and markers,
:mod:`~fedpne_jax.plotting.labels` the legend labels and the measure of text, and
:mod:`~fedpne_jax.plotting.render` the layout, the legends' placement and the file written.
"""
