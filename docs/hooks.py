"""The documentation site's generated parts (an mkdocs ``hooks:`` module, see mkdocs.yml).

A page asks for a generated block with one line, ``<!-- generated: KIND ARGS -->``; at build time
the line is replaced by Markdown written from the package itself or from the measurements kept in
docs/bench/, so that the site cannot drift from either:

* ``algorithms``: every registered algorithm, its family and configuration class;
* ``params FAMILY``: each algorithm of a family with its parameters and defaults, read from the
  registry (``fp.ALGORITHMS``, each configuration's dataclass fields), as ``fedpne run
  --help-params`` prints them;
* ``objectives``: every registered objective with its defaults;
* ``cli``: every command's options, read from ``fedpne_jax.cli.build_parser()``;
* ``bench-...``: a table of one JSON file of docs/bench/, naming the machine it was measured on.

A page that still shows a docstring's Sphinx role as written fails the build (roles.py renders them).

The functions are plain (``render(markdown)``), so tests/test_docs.py checks them without mkdocs.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.join(ROOT, "docs", "bench")
# The site documents the checkout it is built from, installed or not.
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
PLACEHOLDER = re.compile(r"^<!-- generated: ([\w-]+)((?: [^ \n]+)*?) -->$", re.M)
FAMILIES = {"fedpne": "Fed-PNE", "trees": "X-armed trees", "arms": "grid arms", "gp": "kernels and GPs"}


def on_page_markdown(markdown, page=None, config=None, files=None):
    return render(markdown)


# Any role, not only the kinds roles.py renders: a kind it does not know is what this catches.
LEFT_ROLE = re.compile(r":(?:[a-z]+:)+(?:<code>|`)")


def on_post_page(html, page=None, config=None):
    """Fails the build on a Sphinx role that roles.py left as written (a new role kind, say)."""
    left = LEFT_ROLE.search(html)
    if left:
        from mkdocs.exceptions import PluginError
        where = page.file.src_path if page is not None else "a page"
        raise PluginError(f"{where} shows a Sphinx role as written: {html[left.start():left.start() + 60]!r} "
                         "(docs/roles.py renders the roles it knows)")
    return html


def render(markdown: str) -> str:
    """``markdown`` with every placeholder line replaced by its generated block."""
    def one(match):
        kind, args = match.group(1), match.group(2).split()
        if kind not in GENERATORS:
            raise ValueError(f"unknown generated block {kind!r}; known: {', '.join(GENERATORS)}")
        return GENERATORS[kind](*args).rstrip("\n")
    return PLACEHOLDER.sub(one, markdown)


def _table(header, rows) -> str:
    def cell(value) -> str:
        return str(value).replace("|", "\\|").replace("\n", " ")
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


# --- the registry ---------------------------------------------------------------------------------

def _registry():
    import fedpne_jax as fp
    from fedpne_jax.core import registry
    return fp, registry


def family(algorithm) -> str:
    """The folder of fedpne_jax/algorithms/ an algorithm's configuration lives in (plugins: 'plugin')."""
    parts = algorithm.config_type.__module__.split(".")
    return parts[2] if parts[:2] == ["fedpne_jax", "algorithms"] and len(parts) > 2 else "plugin"


def gen_algorithms(pages: str = "") -> str:
    """Every registered algorithm; ``pages``: the algorithm pages' folder relative to the page asking."""
    fp, registry = _registry()
    rows = []
    for name in fp.ALGORITHMS:
        algorithm = registry.get(name)
        fam = family(algorithm)
        page = f"[{FAMILIES.get(fam, fam)}]({pages}{fam}.md)" if fam in FAMILIES else fam
        rows.append((f"`{name}`", registry.label(name), page, "yes" if algorithm.federated else "no",
                     f"`{algorithm.config_type.__name__}`"))
    return _table(("name", "label", "family", "federated (M clients)", "configuration"), rows)


def _default(field) -> str:
    if field.default is not dataclasses.MISSING:
        return f"`{field.default!r}`"
    if field.default_factory is not dataclasses.MISSING:
        return f"`{field.default_factory()!r}`"
    return "(required)"


def _type(field) -> str:
    return str(field.type if isinstance(field.type, str) else getattr(field.type, "__name__", field.type))


def gen_params(fam: str) -> str:
    fp, registry = _registry()
    out = []
    for name in fp.ALGORITHMS:
        algorithm = registry.get(name)
        if family(algorithm) != fam:
            continue
        cls = algorithm.config_type
        doc = (cls.__doc__ or "").strip()
        if doc.startswith(cls.__name__ + "("):        # the dataclass's generated signature says nothing new
            doc = ""
        out.append(f"### `{name}`: {registry.label(name)}\n")
        out.append(f"`fp.make_config({name!r}, ...)` builds a `{cls.__module__}.{cls.__name__}`"
                   f"{'; federated: M clients' if algorithm.federated else '; centralized: one learner'}."
                   f" Metrics: {', '.join(f'`{m}`' for m in algorithm.metrics) or 'none beyond the regret'}.\n")
        rows = [(f"`{f.name}`", _default(f), f"`{_type(f)}`") for f in dataclasses.fields(cls)]
        out.append(_table(("parameter", "default", "type"), rows))
        if doc:
            out.append("\n".join(line.strip() for line in doc.splitlines()) + "\n")
    if not out:
        raise ValueError(f"no registered algorithm belongs to family {fam!r}")
    return "\n".join(out)


def gen_objectives() -> str:
    import objectives
    rows = []
    for name, spec in objectives.OBJECTIVES.items():
        dim = f"{spec.default_dim}" + (" (fixed)" if spec.fixed_dim else " (`--dim`)")
        rows.append((f"`{name}`", spec.kind, dim, spec.default_clients, spec.default_horizon, spec.default_seeds,
                     ", ".join(spec.heterogeneities)))
    return _table(("name", "kind", "dimension", "clients M", "horizon T", "seeds", "heterogeneities"), rows)


# --- the command line -----------------------------------------------------------------------------

def _help(action) -> str:
    text = action.help or ""
    try:
        text = text % {"default": action.default, "prog": "fedpne"}
    except (KeyError, TypeError, ValueError):
        pass
    return " ".join(text.split())


def _option(action) -> str:
    if not action.option_strings:
        return f"`{action.metavar or action.dest}`" + (" ..." if action.nargs in ("+", "*") else "")
    metavar = ""
    if action.nargs != 0:
        metavar = " " + (action.metavar or "{" + ",".join(map(str, action.choices)) + "}" if action.choices
                         else action.metavar or action.dest.upper())
    return ", ".join(f"`{s}{metavar}`" for s in action.option_strings)


def _subcommands(parser, prefix):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield f"{prefix} {name}", sub
                yield from _subcommands(sub, f"{prefix} {name}")


def gen_cli() -> str:
    from fedpne_jax.cli import build_parser
    out = []
    for command, parser in _subcommands(build_parser(), "fedpne"):
        rows = []
        for action in parser._actions:
            if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
                continue
            default = action.default
            shown = "" if default in (None, False, [], argparse.SUPPRESS) else f"`{default}`"
            rows.append((_option(action), shown, _help(action)))
        out.append(f"### `{command}`\n")
        if parser.description:
            out.append(" ".join(parser.description.split()) + "\n")
        if rows:
            out.append(_table(("option", "default", "meaning"), rows))
    return "\n".join(out)


# --- measurements -----------------------------------------------------------------------------------

def _load(name: str) -> dict:
    with open(os.path.join(BENCH, name)) as fh:
        return json.load(fh)


def machine(name: str) -> str:
    """The machine a file of docs/bench/ was measured on: its own record (device, processor, card),
    else docs/bench/machines.json, which names the machines of files written before the scripts
    recorded the processor."""
    data = _load(name) if name.endswith(".json") else {}
    known = _load("machines.json").get(name, {})
    m = data.get("machine", {})
    processor = data.get("processor") or m.get("processor") or known.get("processor")
    card = m.get("nvidia_smi", "").split(",")[0] or known.get("card")
    device = data.get("device") or (", ".join(m.get("devices", [])) or None) or known.get("device")
    jax = data.get("versions", {}).get("jax") or m.get("jax")
    parts = [f"card {card}" if card else None, f"processor {processor}" if processor else "processor not recorded",
             f"device `{device}`" if device else None, f"JAX {jax}" if jax else None]
    note = f" ({known['note']})" if known.get("note") else ""
    return f"Measured on: {'; '.join(p for p in parts if p)}{note}; data: `docs/bench/{name}`.\n"


def _rate(x) -> str:
    if x is None:
        return "–"
    if x >= 1e9:
        return f"{x:.3g}".replace("e+", " × 10^")
    if x >= 1e6:
        return f"{x / 1e6:.3g} M"
    if x >= 1e4:
        return f"{x / 1e3:.3g}k"
    return f"{x:,.0f}" if x >= 100 else f"{x:.3g}"


def _times(x) -> str:
    return "–" if x is None else (f"{x:,.0f}×" if x >= 10 else f"{x:.2g}×")


def _mb(x) -> str:
    return f"{x:.2g}" if x < 10 else f"{x:.0f}"


def _power(x) -> str:
    """10000 as 10⁴, 500 as 500."""
    exponent = len(str(x)) - 1
    if x < 1000 or x != 10 ** exponent:
        return f"{x:,}"
    return "10" + str(exponent).translate(str.maketrans("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹"))


def _secs(x) -> str:
    return "–" if x is None else f"{x:.1f}"


def gen_bench_engine(name: str) -> str:
    rows = [(r["M"], f"{_power(r['T'])}", r["implementation"], r["seeds"], _rate(r["runs_per_second"]),
             _times(r["speedup"]), _secs(r.get("compile_seconds")),
             f"{r['peak_mb']:.0f}" if "peak_mb" in r else "–")
            for r in _load(name)["sections"]["engine"]]
    return machine(name) + "\n" + _table(("M", "T", "implementation", "seeds", "runs/s", "× reference",
                                          "compile s", "peak MB"), rows)


def gen_bench_objectives(name: str) -> str:
    rows = []
    for r in _load(name)["sections"]["objectives"]:
        if r["kind"] == "throughput":
            rows.append((r["objective"], f"M = {r['clients']}, {r['nodes']} nodes × {r['seeds']} seeds",
                         f"{_rate(r['evaluations_per_second'])} evaluations/s"))
        elif r["kind"] == "evaluations":
            pulled = r["pulled_rows"]
            line = (f"{pulled['evaluations']:,} (point, client) evaluations instead of "
                    f"{pulled['evaluations_every_row']:,}, {pulled['run_seconds']:.2f} s")
            if "sklearn" in r:
                line += f"; through `landmine-sklearn`: {r['sklearn']['run_seconds']:.2f} s"
            rows.append((r["objective"], f"Fed-PNE, M = {r['clients']}, T = {r['horizon']}, "
                         f"{pulled['seeds']} seeds", line))
        elif r["kind"] == "svm_agreement":
            rows.append(("landmine vs scikit-learn", f"{r['fields']} fields × a 6 × 6 (C, γ) grid",
                         f"mean |AUC difference| {r['mean_abs_auc_diff']:.1e}"))
    return machine(name) + "\n" + _table(("objective", "workload", "measured"), rows)


def _tree_label(name: str) -> str:
    base, _, rule = name.partition("-")
    from fedpne_jax.core import registry
    label = registry.label(base) if base in registry.NAMES else base
    return label + {"": "", "pyxab": ", PyXAB's rule"}.get(rule, f", {rule}")


def gen_bench_trees(name: str, seeds: str = "1000") -> str:
    rows = [(_tree_label(r["name"]), _rate(r["pulls_per_s"]), _rate(r["reference_pulls_per_s"]),
             r["reference"].replace("PyXAB 0.3.0 ", ""), _times(r["ratio"]), _secs(r["compile_seconds"]))
            for r in _load(name)["sections"]["bench_trees"] if r["seeds"] == int(seeds)]
    return machine(name) + "\n" + _table(("algorithm", "pulls/s", "PyXAB pulls/s", "PyXAB timed over",
                                          "× PyXAB", "compile s"), rows)


def gen_bench_host_devices(name: str) -> str:
    by_name: dict = {}
    for r in _load(name)["sections"]["trees_host_devices"]:
        by_name.setdefault(r["name"], {})[r["devices"]] = r
    rows = [(_tree_label(n), _rate(d[1]["pulls_per_s"]), _rate(d[2]["pulls_per_s"]),
             f"{d[2]['pulls_per_s'] / d[1]['pulls_per_s']:.2f}", _rate(d[2]["reference_pulls_per_s"]),
             f"{_times(d[2]['ratio'])} ({_times(d[1]['ratio'])})") for n, d in by_name.items()]
    return machine(name) + "\n" + _table(("algorithm (1,000 seeds, T = 10⁴)", "1 device", "2 host devices", "×",
                                          "PyXAB", "× PyXAB, 2 devices (1 device)"), rows)


def gen_bench_gpu(name: str, only: str = "") -> str:
    sections = _load(name)["sections"]
    if only:
        sections = {key: sections[key] for key in only.split(",")}
    rows = []
    for r in sections.get("fedpne", {}).get("rows", []):
        if "runs_per_s" in r:
            rows.append((f"Fed-PNE, Garland, M = {r['M']}, T = {_power(r['T'])}", f"{r['seeds']:,}",
                         f"{_rate(r['runs_per_s'])} runs/s", _rate(r.get("cpu_runs_per_s")), _times(r.get("vs_cpu")),
                         _times(r.get("vs_reference")), _secs(r["compile_seconds"]), _mb(r['device_peak_mb'])))
    for key in ("hct", "trees", "gp"):
        for r in sections.get(key, {}).get("rows", []):
            if "pulls_per_s" in r:
                rows.append((f"{_tree_label(r['algorithm'])}, T = {_power(r['T'])}", f"{r['seeds']:,}",
                             f"{_rate(r['pulls_per_s'])} pulls/s", _rate(r.get("reference_pulls_per_s")),
                             _times(r.get("ratio")), "–", _secs(r["compile_seconds"]), _mb(r['device_peak_mb'])))
    for r in sections.get("perpull", {}).get("rows", []):
        rows.append((f"Fed-PNE per pull (`explicit`), {r['pull']} pulls, M = {r['M']}, T = {_power(r['T'])}",
                     f"{r['seeds']:,}", f"{_rate(r['pulls_per_s'])} pulls/s", "–", "–",
                     f"{r['vs_floor']:.0%} of threefry's floor", _secs(r["compile_seconds"]),
                     _mb(r['device_peak_mb'])))
    for r in sections.get("objectives", {}).get("rows", []):
        if r["kind"] == "fedpne-landmine":
            rows.append((f"Fed-PNE on landmine (JAX SVM), M = {r['M']}, T = {r['T']}", r["seeds"],
                         f"{r['run_seconds']:.3f} s a call", "–", "–", "–", _secs(r["compile_seconds"]),
                         _mb(r['device_peak_mb'])))
        elif r["kind"] == "landmine-sklearn":
            rows.append((f"the same through `landmine-sklearn` (host CPU), M = {r['M']}", r["seeds"],
                         f"{r['run_seconds']:.2f} s", "–", "–", "–", "–", "–"))
    return machine(name) + "\n" + _table(("workload", "seeds", "rate", "CPU / PyXAB rate", "× CPU / × PyXAB",
                                          "× NumPy reference", "compile s", "device peak MB"), rows)


def _pull_rates(name: str, keys) -> dict:
    return {(r["algorithm"], r["seeds"]): r["pulls_per_s"] for key in keys
            for r in _load(name)["sections"].get(key, {}).get("rows", []) if "pulls_per_s" in r}


def gen_bench_cmdbuf(default: str, flagged: str) -> str:
    """The trees at their default XLA flags against XLA's command buffers: ``default``'s hct and trees
    sections against ``default``'s cmdbuf section (HCT, run again under the flag in the same call)
    and ``flagged``'s trees section (the same call under the flag)."""
    plain = _pull_rates(default, ("hct", "trees"))
    flag = _pull_rates(flagged, ("trees",)) | _pull_rates(default, ("cmdbuf",))
    rows = [(_tree_label(a), f"{s:,}", _rate(v), _rate(flag[(a, s)]), f"{flag[(a, s)] / v:.2f}")
            for (a, s), v in plain.items() if (a, s) in flag]
    return (machine(default) + "\n" + _table(("algorithm (T = 10⁴)", "seeds", "default pulls/s",
                                              "command buffers", "×"), rows)
            + f"\nCommand-buffer rows: the `cmdbuf` section of `docs/bench/{default}` and the `trees` section "
              f"of `docs/bench/{flagged}`.\n")


def gen_bench_files() -> str:
    rows = []
    for name in sorted(os.listdir(BENCH)):
        if name == "machines.json" or not name.endswith((".json", ".jsonl")):
            continue
        if name.endswith(".jsonl"):
            with open(os.path.join(BENCH, name)) as fh:
                sections = f"{sum(1 for line in fh if line.strip())} rows"
        else:
            data = _load(name)
            # bench.py's files name their sections; a single script's file is one section, its name's stem
            sections = ", ".join(sorted(data["sections"])) if "sections" in data else name.split("-")[0]
        rows.append((f"`{name}`", sections, machine(name).removeprefix("Measured on: ").split("; data:")[0]))
    return _table(("file", "sections", "machine"), rows)


def gen_study_times() -> str:
    """The wall seconds of each study of the gallery run (docs/figures/timing.json, which ``fedpne
    reproduce`` writes), longest first."""
    with open(os.path.join(ROOT, "docs", "figures", "timing.json")) as fh:
        times = json.load(fh)
    rows = [(f"`{study}`", f"{seconds:.0f}") for study, seconds in sorted(times.items(), key=lambda kv: -kv[1])]
    return _table(("study", "wall seconds"), rows)


def gen_bench_base(name: str) -> str:
    """scripts/bench_base.py: fp.run now against an earlier commit, timed interleaved in one run."""
    data = _load(name)
    rows = [(r["row"], r["seeds"], f"{r['base_s']:.3f}", f"{r['now_s']:.3f}", f"{r['ratio']:.2f}",
             f"{r['base_first_s']:.1f} / {r['now_first_s']:.1f}") for r in data["rows"]]
    return (machine(name) + f"\nBase: `{data['base']}`; now: `{data['now']}`; {data['repeats']} processes per "
            f"checkout and row, each the fastest of five timed runs (the table: their median).\n\n"
            + _table(("row", "seeds", "base s", "now s", "now / base", "first call s (base / now)"), rows))


GENERATORS = {"algorithms": gen_algorithms, "bench-base": gen_bench_base, "params": gen_params, "objectives": gen_objectives, "cli": gen_cli,
              "bench-engine": gen_bench_engine, "bench-objectives": gen_bench_objectives,
              "bench-trees": gen_bench_trees, "bench-host-devices": gen_bench_host_devices,
              "bench-gpu": gen_bench_gpu, "bench-cmdbuf": gen_bench_cmdbuf, "bench-files": gen_bench_files,
              "study-times": gen_study_times}
