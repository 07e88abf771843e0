"""The studies behind the paper's figures and the new ones: each a sweep definition in two sizes.

A *study* (:class:`Study`) is one sweep definition (:mod:`fedpne_jax.experiments.sweep`) in two sizes
(:class:`Size`): ``full`` (the paper's setting, hundreds of seeds where a run is cheap) and
``quick`` (small T, few seeds: every figure in minutes on a laptop, for smoke tests).  Studies shared
by figures (Fig. 3 and Fig. 6 read the same synthetic comparison) run once; :data:`STUDIES` names
them all.

Settings the paper does not state are chosen here and written into every figure's JSON (the sweep
definitions): M = 10 clients and T = 10^4 rounds on the synthetic functions, Gaussian noise of
standard deviation 0.1, Fed-PNE with its App. E parameters (nu1 = 1, rho = 0.5, c = 0.1, c1 = 1),
HCT as PyXAB runs it (``expand='pyxab'``, nu1 = 1, rho = 0.75), Fed1-UCB with kappa = 1, KernelTS
and FN-UCB with their public codes' defaults.
"""
from __future__ import annotations

import dataclasses

from fedpne_jax.experiments.sweep import share_kind

SYNTHETIC = ("garland", "doublesine")
REAL = ("landmine", "covid")
TITLES = {"garland": "Garland", "doublesine": "DoubleSine", "landmine": "Landmine", "covid": "COVID",
          "digits": "Digits MLP"}
NOISE = "gaussian:0.1"
HCT = {"expand": "pyxab", "nu": 1.0, "rho": 0.75}      # App. E: PyXAB's HCT with nu1 = 1, rho = 0.75
COMPARED = ("fedpne", "hct", "kernelts", "fed1ucb", "fnucb")     # Fig. 3's algorithms, in its legend order
REGRET_AXIS = "cumulative regret"      # per client for federated algorithms: the figure titles say so
# Quick studies are bound by compilation: there, the synthetic functions of one box share a program
# per algorithm (a sweep's share_programs), at the price of runs that may differ in their last bits
# from those of each function compiled alone.  Full-size runs keep each function's own program.
QUICK_SHARES = ("synthetic",)


@dataclasses.dataclass(frozen=True)
class Size:
    """M, T and seeds of a study in one mode."""
    horizon: tuple
    seeds: int
    clients: tuple = (10,)


@dataclasses.dataclass(frozen=True)
class Study:
    name: str
    objectives: tuple             # names or objective tables (see fedpne_jax.experiments.sweep)
    algorithms: tuple
    full: Size
    quick: Size
    params: dict = dataclasses.field(default_factory=dict)      # per algorithm: {name: {param: value}}
    grid: dict = dataclasses.field(default_factory=dict)        # per algorithm: {name: {param: [values]}}
    quick_grid: dict = dataclasses.field(default_factory=dict)  # the grid in quick mode, where it differs
    quick_params: dict = dataclasses.field(default_factory=dict)  # per algorithm: params changed in quick mode
    minutes: float = 0.0          # full-mode wall time, compilation included, two studies at a time on a 2-core CPU
    share_programs: bool = False  # the sweep's share_programs: one program for its BBOB functions

    def definition(self, quick: bool = False, seeds: int | None = None) -> dict:
        size = self.quick if quick else self.full
        raw = {"objectives": list(self.objectives), "algorithms": list(self.algorithms),
               "clients": list(size.clients), "horizon": list(size.horizon),
               "seeds": size.seeds if seeds is None else seeds,
               # A run's checkpoints are distinct rounds: never more than the shortest horizon has.
               "params": {"noise": NOISE, "checkpoints": min(20 if quick else 50, min(size.horizon))}}
        for name in self.algorithms:
            table = {}
            params = {**self.params.get(name, {}), **(self.quick_params.get(name, {}) if quick else {})}
            if params:
                table["params"] = params
            grid = (self.quick_grid if quick and name in self.quick_grid else self.grid).get(name)
            if grid:
                table["grid"] = {k: list(v) for k, v in grid.items()}
            if table:
                raw[name] = table
        kinds = sorted({*(["bbob"] if self.share_programs else []), *(self._quick_shares() if quick else [])})
        if kinds:                # sweep.normalise writes ["bbob"] as true, as every definition has it
            raw["share_programs"] = kinds
        return raw

    def _quick_shares(self) -> list:
        """The kinds of QUICK_SHARES of which the study has several functions (naming a kind with one
        would change the study's definition, not its programs)."""
        names = {o if isinstance(o, str) else o["name"] for o in self.objectives}
        return [k for k in QUICK_SHARES if sum(share_kind(n) == k for n in names) > 1]


def _decades(lo: int, hi: int, per_decade: int = 2) -> tuple:
    """Horizons from 10^lo to 10^hi, ``per_decade`` per decade, rounded to integers."""
    steps = (hi - lo) * per_decade
    return tuple(int(round(10 ** (lo + i / per_decade))) for i in range(steps + 1))


# Clients' objectives f + p_m with zero-sum smooth random p_m (objectives/heterogeneity.py), by amplitude.
BBOB_FUNCTIONS = (1, 8, 15, 21)     # sphere, Rosenbrock, rotated Rastrigin, Gallagher 101 peaks
BBOB_DIMS = (2, 5)
BBOB = tuple({"name": f"bbob-f{f}", "dim": d} for d in BBOB_DIMS for f in BBOB_FUNCTIONS)
BBOB_NAMES = {1: "sphere", 8: "Rosenbrock", 15: "Rastrigin", 21: "Gallagher 101"}
# The X-armed family beside Fed-PNE: PyXAB's defaults (pyxab=True where an algorithm has the field), with
# the paper's nu = 1, rho = 0.75 where an algorithm has them (App. E).
XARMED = ("hoo", "hct", "doo", "soo", "stosoo", "vhct", "poo", "gpo", "pct", "vpct", "sequool", "stroquool", "zooming",
          "vroom")
XARMED_OBJECTIVES = ("garland", "doublesine", "himmelblau") + tuple({"name": f"bbob-f{f}", "dim": 2}
                                                                    for f in BBOB_FUNCTIONS)
_NU_RHO = {"nu": 1.0, "rho": 0.75}
XARMED_PARAMS = {"hct": HCT, "hoo": _NU_RHO, "zooming": _NU_RHO, "vhct": {**_NU_RHO, "pyxab": True},
                 **{name: {"pyxab": True} for name in ("soo", "stosoo", "poo", "gpo", "pct", "vpct")}}
FOURIER = tuple({"name": f, "heterogeneity": "fourier", "amplitude": a} for f in SYNTHETIC for a in (0.0, 0.1, 0.3, 1.0, 3.0))

STUDIES = {s.name: s for s in [
    Study("compare-synthetic", SYNTHETIC, ("fedpne", "hct", "kernelts", "fed1ucb", "bo", "bbo"),
          full=Size((10_000,), 100), quick=Size((300,), 4), params={"hct": HCT}, minutes=1.4),
    # FN-UCB trains M networks every round: 20 seeds cost as much as the rest of the comparison.
    Study("compare-synthetic-fnucb", SYNTHETIC, ("fnucb",), full=Size((10_000,), 20), quick=Size((300,), 2),
          minutes=1.5),
    # KernelTS evaluates every candidate once per run: 10 x 10 candidates on the 2-D landmine box and
    # 5 x 5 x 5 on the 3-D digits box keep that to the cost of the other algorithms' runs.  So do
    # Fed1-UCB and FN-UCB with their arms: a quick run of 15 or 20 rounds pulls a few of them, so
    # quick studies use 5 x 5 and 3 x 3 x 3 (evaluating 125 candidates was 10 of compare-digits' 50 s).
    Study("compare-landmine", ("landmine",), COMPARED, full=Size((500,), 10, (4,)),
          quick=Size((20,), 2, (2,)), params={"hct": HCT, "kernelts": {"num_candidates": 100}},
          quick_params={"kernelts": {"num_candidates": 25}, "fed1ucb": {"arms": 5}, "fnucb": {"arms": 5}},
          minutes=2.0),
    Study("compare-covid", ("covid",), ("fedpne", "hct", "kernelts", "fed1ucb"), full=Size((10_000,), 100, (8,)),
          quick=Size((300,), 4, (8,)), params={"hct": HCT}, minutes=0.7),
    Study("compare-covid-fnucb", ("covid",), ("fnucb",), full=Size((10_000,), 20, (8,)), quick=Size((300,), 2, (8,)),
          minutes=0.5),
    Study("compare-digits", ("digits",), COMPARED, full=Size((300,), 8, (10,)), quick=Size((15,), 2, (3,)),
          params={"hct": HCT, "kernelts": {"num_candidates": 125}},
          quick_params={"kernelts": {"num_candidates": 27}, "fed1ucb": {"arms": 3}, "fnucb": {"arms": 3}},
          minutes=1.0),
    Study("arms", SYNTHETIC, ("fed1ucb",), full=Size((10_000,), 100), quick=Size((300,), 4),
          grid={"fed1ucb": {"arms": (10, 30, 100, 300, 1000)}}, quick_grid={"fed1ucb": {"arms": (10, 100, 1000)}},
          minutes=0.8),
    Study("clients-synthetic", SYNTHETIC, ("fedpne",), full=Size((10_000,), 100, (1, 3, 10, 30, 100)),
          quick=Size((300,), 4, (1, 10)), minutes=1.1),
    Study("clients-landmine", ("landmine",), ("fedpne",), full=Size((500,), 5, (1, 2, 4, 8)),
          quick=Size((20,), 2, (1, 2)), minutes=1.2),
    Study("clients-covid", ("covid",), ("fedpne",), full=Size((10_000,), 100, (1, 2, 4, 8)),
          quick=Size((300,), 4, (1, 8)), minutes=0.8),
    Study("clients-digits", ("digits",), ("fedpne",), full=Size((300,), 8, (1, 2, 5, 10)),
          quick=Size((15,), 2, (1, 3)), minutes=0.8),
    Study("horizons-synthetic", SYNTHETIC, ("fedpne",), full=Size(_decades(2, 6), 100), quick=Size((100, 1000), 4),
          minutes=0.3),
    Study("horizons-landmine", ("landmine",), ("fedpne",), full=Size((30, 100, 300, 1000, 3000), 4, (4,)),
          quick=Size((10, 30), 2, (2,)), minutes=0.9),
    Study("horizons-covid", ("covid",), ("fedpne",), full=Size(_decades(2, 6), 100, (8,)),
          quick=Size((100, 1000), 4, (8,)), minutes=0.5),
    Study("privacy", SYNTHETIC, ("fedpne",), full=Size((10_000,), 100), quick=Size((300,), 4),
          params={"fedpne": {"dp_delta": 0.1}},          # delta = 1/M, M = 10 (Thm. D.2's setting)
          grid={"fedpne": {"dp_epsilon": (0.1, 0.3, 1.0, 3.0, 10.0, 30.0, 100.0)}}, minutes=0.4),
    Study("heterogeneity", FOURIER, ("fedpne",), full=Size((10_000,), 100), quick=Size((300,), 4), minutes=0.3),
    # BBO pools the clients' values as if they came from one objective, so differing optima mislead it.
    Study("heterogeneity-bbo", FOURIER, ("bbo",), full=Size((10_000,), 20), quick=Size((300,), 2), minutes=0.7),
    Study("bbob", BBOB, ("fedpne", "hct", "bbo"), full=Size((3_000,), 20), quick=Size((300,), 3),
          params={"hct": HCT}, minutes=1.4, share_programs=True),
    Study("xarmed", XARMED_OBJECTIVES, ("fedpne",) + XARMED, full=Size((10_000,), 100), quick=Size((300,), 3),
          params=XARMED_PARAMS, minutes=13.8, share_programs=True),
    Study("sensitivity", ("garland",), ("fedpne",), full=Size((10_000,), 100), quick=Size((300,), 4),
          grid={"fedpne": {"c": (0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0), "rho": (0.3, 0.4, 0.5, 0.6, 0.7)}},
          minutes=0.2),
]}
