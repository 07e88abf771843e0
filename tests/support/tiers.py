"""The suite's two tiers.

The quick tier (``pytest``, the README's test command and CI) runs every test function with at least
one of its cases; ``pytest --thorough`` (or FEDPNE_THOROUGH=1) also runs the cases listed here.  They
are further objectives, splits, sizes, samplers and algorithms of a property that a quick case
already checks, each compiling programs of its own: the two tiers differ in how many configurations
a property is checked on, not in which properties are checked.  tests/conftest.py skips these cases
(so the summary counts them) and refuses a list that would leave a test function with no quick case,
unless WHOLE names it with the quick test that covers it.

Patterns are fnmatch patterns over pytest node ids ("[" is written "[[]").
"""
from __future__ import annotations

import fnmatch

CASES = {
    # Noise-free runs against the NumPy reference: the quick cases keep one-, two- and five-dimensional
    # objectives, M = 1, 3, 4, 10, both splits, every sampler and the deep float64 run.
    "tests/test_exact.py": [
        "test_longest_split_matches_reference[[]garland-1-1-*", "test_longest_split_matches_reference[[]garland-1-10-*",
        "test_longest_split_matches_reference[[]doublesine-1-1-*",
        "test_longest_split_matches_reference[[]himmelblau-2-10-*",
        "test_longest_split_matches_reference[[]ackley-*", "test_random_split_matches_reference_per_seed[[]himmelblau-2]",
        "test_deep_run_is_exact[[]doublesine-*"],
    "tests/test_statistics.py": ["test_samplers_agree_with_aggregate[[]client]", "test_bernoulli_matches_reference[[]explicit]"],
    "tests/test_evaluations.py": ["test_numbers_do_not_depend_on_capacity_or_batch[[]kw1-8]"],
    "tests/test_dp.py": ["test_huge_epsilon_equals_non_dp[[]client]"],
    "tests/test_real_objectives.py": ["test_short_fedpne_run[[]digits]", "test_short_fedpne_run[[]landmine]"],
    "tests/test_run_checks.py": ["test_f_star_below_the_values_is_reported_by_the_explicit_sampler[[]kw1]"],
    "tests/test_errors.py": ["test_nan_from_objective_is_reported[[]kw2]"],
    "tests/test_measures.py": ["test_tree_measures_equal_numpy_over_the_evaluated_points[[]doo]",
                               "test_tree_measures_equal_numpy_over_the_evaluated_points[[]soo]",
                               "test_tree_measures_equal_numpy_over_the_evaluated_points[[]hoo]",
                               "test_gp_measures_equal_numpy_over_the_picked_candidates[[]bbo]"],
    # PyXAB's regret distributions: the quick cases keep one algorithm of each kind of rule (a
    # UCB tree, a parallel meta-algorithm, a fixed schedule, an adaptive partition).
    "tests/test_pyxab_statistics.py": [f"test_final_regret_agrees_with_pyxab[[]{name}]" for name in
                                       ("doo", "soo", "stosoo", "hoo", "vhct", "gpo", "pct", "vpct", "sequool")],
    # The tree algorithms' reference cases: one case per split and per rule variant stays quick.
    "tests/test_soo.py": ["test_noise_free_garland_evaluates_the_reference_points[[]True]",
                          "test_noise_free_himmelblau_evaluates_the_reference_points[[]False-random-100]",
                          "test_noisy_regret_and_depth_equal_the_reference_statistically[[]True]"],
    "tests/test_doo.py": ["test_noise_free_garland_evaluates_the_reference_points[[]geometric]",
                          "test_noise_free_himmelblau_evaluates_the_reference_points[[]random-geometric]"],
    "tests/test_gpo.py": ["test_noise_free_himmelblau_evaluates_the_reference_points[[]hoo]",
                          "test_garland_evaluates_pyxabs_own_gpo_points[[]hoo-*"],
    "tests/test_poo.py": ["test_noise_free_himmelblau_evaluates_the_reference_points[[]hoo]"],
    "tests/test_vhct.py": ["test_noise_free_garland_pulls_the_reference_points[[]False]"],
    "tests/test_stosoo.py": ["test_noise_free_rastrigin_evaluates_the_reference_points[[]False-longest-*"],
    "tests/test_sequool.py": ["test_noise_free_himmelblau_evaluates_the_reference_points[[]random-300]"],
    "tests/test_stroquool.py": ["test_noise_free_himmelblau_evaluates_the_reference_points[[]random]"],
    "tests/test_zooming.py": ["test_noise_free_himmelblau_evaluates_the_reference_points[[]random]"],
    "tests/test_vroom.py": ["test_noise_free_himmelblau_evaluates_the_reference_points[[]longest]"],
    "tests/test_fed1ucb.py": ["test_noise_free_equals_reference[[]170]"],
}

# Whole test functions in the thorough tier, each with the quick test that checks its property.
WHOLE = {
    "tests/test_sharding.py::test_explicit_sampler_on_four_devices_equals_one":
        "test_four_devices_equal_one (the aggregate sampler; the explicit one's block sums are checked "
        "alone and in batches by tests/test_statistics.py::test_uniform_pull_points_alone_equal_batch)",
    "tests/test_reproducibility.py::test_explicit_sampler_without_jit_equals_jit":
        "test_without_jit_equals_jit (a whole run, eagerly)",
}


def _matches(nodeid: str, path: str, pattern: str) -> bool:
    file, _, name = nodeid.partition("::")
    return file == path and fnmatch.fnmatchcase(name, pattern)


def thorough(nodeid: str) -> bool:
    """Whether the test ``nodeid`` runs in the thorough tier only."""
    path = nodeid.partition("::")[0]
    return nodeid in WHOLE or any(_matches(nodeid, path, pattern) for pattern in CASES.get(path, ()))


def stale(nodeids) -> list[str]:
    """The entries of CASES and WHOLE that name none of ``nodeids`` (the whole suite's)."""
    nodeids = set(nodeids)
    return ([f"{path}::{pattern}" for path, patterns in CASES.items() for pattern in patterns
             if not any(_matches(n, path, pattern) for n in nodeids)] + [n for n in WHOLE if n not in nodeids])
