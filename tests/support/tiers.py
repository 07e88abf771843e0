"""The suite's two tiers.

The gate (``pytest``: the README's test command) is held to five minutes on two cores (the site's
Testing page gives its measured times), so it runs what no day's work may break, once:

* the registry-driven contract: every algorithm refuses bad parameters by name; Fed-PNE, HCT and
  GP-UCB (CONTRACT_GATE) run by name, raise no flag, report a value above f*, compile no
  processor-dependent operation, record their measures and give their recorded runs bit for bit,
  and a seed in a grid equals it in a batch for Fed-PNE and HCT;
* two of the behaviour fixture's Fed-PNE runs (DP, and pulls at uniform points), bit for bit
  (tests/test_behaviour.py; CASES names the parts only the thorough tier checks);
* Fed-PNE's ask/tell stepper and Optimizer against fp.run, bit for bit;
* for every algorithm, a noise-free run against its NumPy reference in tests/support, exactly (PCT
  and VPCT through GPO over HCT and VHCT's own cases);
* every refusal and error message, NaN and a full node table, and the file-safety tests: they compile
  little or nothing;
* Ctrl-C while a result is written keeps it; plugins; the command line's JSON; COCO's values of two
  BBOB functions; the fixed-order reductions.

.ci/run runs the gate and then the thorough tier's own tests, so CI runs the whole suite.

``pytest --thorough`` (or FEDPNE_THOROUGH=1) runs the whole suite: every further objective, split, size
and sampler; the noisy runs against the references and PyXAB within their standard errors; COCO's
values of all 24 BBOB functions; the real objectives against NumPy and scikit-learn; the property tests
of the command line and of sweeps; a seed alone and in every grid; capacity growth, interrupts,
resumed sweeps, sharding (the command line over the host's cores too), the compilation cache read by a
second process, the dropping of old programs, simple regret against runs cut at the checkpoints, the
tree skeleton's blocked kernels against their step-by-step forms, and the gallery.  Run it
after any change to an algorithm's arithmetic, a sampler or an objective, and before a release (its
time: the site's Testing page).

FUNCTIONS names the test functions only the thorough tier runs ("*": a whole file); CASES names the
cases of gate functions that only it runs.  tests/conftest.py skips both (so the summary counts them),
and refuses entries that name no test and a CASES list that leaves a gate function with no case.

Patterns are fnmatch patterns over pytest node ids ("[" is written "[[]").
"""
from __future__ import annotations

import fnmatch

from fedpne_jax.algorithms import BUILTIN
from tests.support.behaviour import OWN

# The built-in algorithms (tests/conftest.py parametrizes the contract with them), those with a
# recorded run of their own, and the ones whose contract runs in the gate: Fed-PNE, a tree, a GP.
ALGORITHMS = tuple(a.name for a in BUILTIN)
RECORDED = tuple(OWN)
CONTRACT_GATE = ("fedpne", "hct", "gpucb")

# Test functions of the thorough tier only, by file.
FUNCTIONS = {
    "tests/test_api_errors.py": ["test_complete_sweep_statistics_equal_numpy",
                                 "test_find_refuses_an_unknown_label_listing_the_known_ones",
                                 "test_partial_sweep_statistics_raise_no_warning",
                                 "test_run_accepts_a_registered_objective_name",
                                 "test_run_builds_a_single_client_objective_for_an_algorithm_without_clients",
                                 "test_run_grid_builds_the_named_objective_for_each_configuration"],
    "tests/test_api_properties.py": ["test_find_refuses_an_unknown_label_naming_it",
                                     "test_find_returns_the_configurations_whose_labels_equal_the_values_given",
                                     "test_load_sweep_reads_the_labels_the_sweep_was_built_with",
                                     "test_make_objective_builds_every_valid_call",
                                     "test_run_returns_the_seeds_it_was_asked_for"],
    # Ask/tell: the gate keeps Fed-PNE's stepper against fp.run (CASES), the Optimizer against fp.run,
    # and the file and call refusals; every other algorithm's stepper, resume in a new process, the
    # property test over call sequences and the 500-seed noisy comparisons are thorough.
    "tests/test_asktell.py": ["test_any_sequence_of_calls_keeps_the_run", "test_box_without_f_star_reports_no_regret",
                              "test_saved_run_continues_in_a_new_process", "test_a_table_outgrown_by_an_ask_is_grown_and_the_step_asked_again"],
    "tests/test_asktell_noisy.py": ["*"],
    "tests/test_examples_asktell.py": ["*"],
    # Runs on real SuperLink and SuperNode processes (2 to 21 s each on an idle two-core machine, more
    # under load: docs/flower-results.md); the gate keeps the reply checks, the run configuration and
    # the privacy noise, which start no process.
    "tests/test_flower.py": ["test_noise_free_run_over_flower_is_fp_runs_run",
                             "test_fedpne_flower_local_over_tls_with_auth_is_the_same_run_and_leaves_no_process",
                             "test_supernode_auth_admits_only_registered_keys",
                             "test_simulation_engine_run_is_fp_runs_run_and_leaves_no_process",
                             "test_a_malformed_reply_is_refused_naming_the_client",
                             "test_noise_free_bbob_run_over_flower_is_fp_runs_run",
                             "test_a_killed_supernode_stops_the_run_with_its_state_kept_and_the_rerun_finishes_it",
                             "test_on_client_loss_continue_goes_on_and_records_the_lost_client",
                             "test_a_crashed_server_resumes_from_its_last_step_with_the_same_numbers",
                             "test_stopped_runs_leave_the_executors_serving_the_next_run",
                             "test_noisy_runs_over_flower_match_fp_run_in_distribution", "test_ctrl_c_stops_every_process_it_started"],
    "tests/test_bbob.py": ["test_instances_heterogeneity", "test_one_dimensional_functions_match_coco",
                           "test_shift_and_fourier_keep_the_bbob_function_as_global_objective"],
    "tests/test_capacity.py": ["test_small_capacity_grows_to_the_same_result"],
    "tests/test_cli.py": ["test_module_entry_point_runs_dp", "test_run_baseline_with_set_options"],
    "tests/test_cli_faults.py": ["test_a_full_disk_after_the_run_keeps_the_result_in_a_fallback_file",
                                 "test_a_full_disk_during_a_sweep_is_a_message_naming_the_folder",
                                 "test_ctrl_c_exits_130_with_a_message", "test_overwrite_restarts_a_studys_time", "test_the_fallback_goes_to_the_temporary_folder_when_the_working_directory_is_full", "test_one_seed_has_no_standard_deviation"],
    "tests/test_cli_properties.py": ["*"],
    # Three processes that compile the same program (24 s of the gate); the gate keeps the folder's
    # naming, safety and pruning tests, which compile nothing.
    "tests/test_compile_cache.py": ["test_a_second_process_loads_the_programs_and_computes_the_same_bits"],
    "tests/test_cli_refusals.py": ["test_output_to_standard_output_keeps_the_summary_apart",
                                   "test_short_runs_default_to_one_checkpoint_per_round"],
    "tests/test_diagnostics.py": ["test_a_large_node_table_warns", "test_a_plain_run_says_nothing",
                                  "test_a_root_only_configuration_warns_and_keeps_the_warning",
                                  "test_command_line_warns_on_stderr_and_in_the_json",
                                  "test_sweep_warns_once_per_configuration_naming_it",
                                  "test_the_warning_follows_the_first_phase_of_the_plan"],
    "tests/test_doo.py": ["test_float32_equals_the_reference_while_its_cells_are_exact",
                          "test_garland_evaluates_pyxabs_own_doo_points",
                          "test_noise_free_himmelblau_evaluates_the_reference_points",
                          "test_noisy_regret_equals_the_reference_statistically"],
    "tests/test_dp.py": ["test_dp_matches_reference", "test_huge_epsilon_equals_non_dp",
                         "test_regret_rises_as_epsilon_falls"],
    "tests/test_errors.py": ["test_bernoulli_values_outside_unit_interval_are_reported"],
    "tests/test_evaluations.py": ["test_both_paths_make_the_same_run",
                                  "test_closed_form_objectives_evaluate_every_row",
                                  "test_evaluations_are_the_pulled_rows_rounded_to_the_block",
                                  "test_numbers_do_not_depend_on_capacity_or_batch",
                                  "test_objectives_are_classified_by_their_functions", "test_a_global_combined_from_the_local_values_is_not_evaluated_again"],
    "tests/test_exact.py": ["test_deep_run_is_exact", "test_delta_c1_nu_are_used", "test_short_and_cut_horizons"],
    "tests/test_fed1ucb.py": ["test_objective_errors", "test_registry_and_json",
                              "test_uniform_noise_matches_reference"],
    "tests/test_fnucb.py": ["test_features_are_the_gradient",
                            "test_history_counts_give_the_explicit_mse_gradient_and_sgd",
                            "test_whitened_widths_match_the_inverse"],
    # 200 whole noisy runs a side, the reference's in NumPy float64 (minutes on two cores).
    "tests/test_fnucb_noisy.py": ["*"],
    "tests/test_gpo.py": ["test_garland_evaluates_pyxabs_own_gpo_points",
                          "test_noisy_regret_equals_the_reference_statistically",
                          "test_pct_is_gpo_over_hct_and_pyxabs_pct"],
    "tests/test_grid.py": ["test_grid_is_one_compilation_and_equals_separate_runs",
                           "test_horizons_share_one_program_and_equal_separate_runs",
                           "test_pairs_in_any_order_equal_the_grid"],
    "tests/test_hct.py": ["test_garland_pulls_pyxabs_own_hct_points",
                          "test_noise_free_himmelblau_with_reexpansion_pulls_the_reference_points",
                          "test_result_records_the_table"],
    "tests/test_heterogeneity.py": ["test_fedpne_runs_on_fourier_heterogeneity",
                                    "test_mean_of_locals_is_the_original_function",
                                    "test_same_seed_same_perturbation_other_seed_other"],
    # The command line over the host's cores as devices, in a subprocess (26 s of the gate): sharding
    # is the thorough tier's, and the gate keeps how the device count is chosen and refused.
    "tests/test_host_devices.py": ["test_the_command_line_shards_over_the_host_devices_and_a_small_call_stays_on_one"],
    "tests/test_hoo.py": ["test_garland_pulls_pyxabs_own_t_hoo_points",
                          "test_noise_free_himmelblau_pulls_the_reference_points",
                          "test_result_records_the_tree_bounds"],
    "tests/test_interrupt.py": ["test_ctrl_c_keeps_the_finished_seeds",
                                "test_ctrl_c_stops_the_workers_of_reproduce_and_a_rerun_resumes",
                                "test_a_worker_whose_parent_was_killed_exits"],
    "tests/test_measures.py": ["test_gp_measures_equal_numpy_over_the_picked_candidates",
                               "test_results_carry_the_measures_per_seed",
                               "test_simple_regret_at_a_checkpoint_is_the_final_one_of_the_run_cut_there",
                               "test_the_centre_is_evaluated_once_outside_the_programs",
                               "test_tree_measures_equal_numpy_over_the_evaluated_points"],
    # Seven mutants of a copy of the package, each through the gate tests up to its first failure.
    "tests/test_mutation.py": ["*"],
    "tests/test_objectives.py": ["test_an_objective_is_traced_once_however_many_sites_call_it",
                                 "test_dimension_of_ackley_and_rastrigin",
                                 "test_shift_heterogeneity_keeps_the_global_objective", "test_values_match_numpy"],
    # Figure layout (matplotlib's text extents, about 10 s): thorough.
    "tests/test_plots.py": ["*"],
    "tests/test_plugins.py": ["test_installed_entry_points_load_lazily", "test_readme_examples_run_as_printed",
                              "test_registered_objective_regret_is_T_times_the_mean_gap",
                              "test_run_grid_equals_separate_runs",
                              "test_sweep_file_with_plugins_runs_and_a_missing_plugin_is_refused"],
    "tests/test_poo.py": ["test_garland_evaluates_pyxabs_own_poo_points",
                          "test_noisy_regret_equals_the_reference_statistically"],
    "tests/test_portability.py": ["test_objectives_compile_to_portable_programs"],
    "tests/test_program_cache.py": ["test_least_recently_used_programs_are_dropped_and_unmapped"],
    "tests/test_pulls.py": ["test_row_sums_in_float32_keep_float32_accuracy"],
    "tests/test_python_objectives.py": ["test_an_exception_reaches_the_user_with_its_message",
                                        "test_fedpne_makes_one_call_per_site_and_phase",
                                        "test_four_devices_equal_one", "test_from_pyxab_loops_over_distinct_points",
                                        "test_grid_shares_the_calls", "test_hct_makes_one_call_per_round",
                                        "test_landmine_sklearn_agrees_with_the_jax_svm",
                                        "test_local_fn_of_points_and_clients_gets_only_the_pairs_it_must_compute",
                                        "test_local_sites_make_one_call_per_phase_for_all_clients",
                                        "test_nan_is_reported_by_the_run_flags",
                                        "test_uniform_pulls_match_the_jax_objective",
                                        "test_values_match_jax_and_take_one_call_per_batch"],
    "tests/test_pyxab_statistics.py": ["test_final_regret_agrees_with_pyxab"],
    "tests/test_real_objectives.py": ["test_covid_f_star_is_a_dense_search_maximum", "test_covid_matches_numpy",
                                      "test_covid_nan_dosage_is_reported_as_nan",
                                      "test_covid_none_heterogeneity_gives_every_client_the_global_objective",
                                      "test_digits_matches_numpy_mlp", "test_landmine_fields_come_from_the_key",
                                      "test_landmine_matches_numpy_svm",
                                      "test_programs_have_no_processor_dependent_operation", "test_short_fedpne_run",
                                      "test_vmapped_equals_one_point_at_a_time",
                                      "test_wrong_point_dimension_is_refused", "test_global_values_combined_from_the_local_ones_are_the_global_functions_bits"],
    "tests/test_report.py": ["test_command_line_report_and_its_errors",
                             "test_export_writes_every_checkpoint_of_every_run",
                             "test_ioh_export_is_read_back_by_iohinspector_exact_at_checkpoints_and_targets",
                             "test_report_tables_equal_the_runs", "test_ecdf_axis_is_the_unit_interval_and_win_rates_a_heat_map", "test_report_without_matplotlib_writes_everything_else"],
    "tests/test_reproduce.py": ["test_a_figure_that_asks_for_it_writes_the_report_of_its_studies",
                                "test_changed_study_is_refused_unless_overwrite",
                                "test_every_figure_builds_draws_and_summarises",
                                "test_plot_command_draws_runs_and_sweeps",
                                "test_quick_figure_png_and_data_equal_the_runs",
                                "test_rerun_resumes_without_running",
                                "test_studies_in_worker_processes_write_the_same_numbers",
                                "test_summary_is_generated_from_the_data",
                                "test_sweep_objective_amplitude", "test_without_matplotlib_data_are_still_written"],
    "tests/test_reproducibility.py": ["test_base_seed_changes_runs", "test_client_sampler_alone_equals_batch",
                                      "test_explicit_sampler_without_jit_equals_jit",
                                      "test_many_coordinates_alone_equal_batch",
                                      "test_order_and_company_do_not_matter", "test_same_shapes_do_not_recompile",
                                      "test_seed_alone_equals_seed_in_batch", "test_without_jit_equals_jit"],
    "tests/test_run_checks.py": ["test_a_run_cut_into_calls_equals_one_call",
                                 "test_built_in_heterogeneities_keep_the_mean",
                                 "test_f_star_below_the_values_is_reported_by_the_explicit_sampler",
                                 "test_numpy_scalars_are_accepted"],
    "tests/test_sequool.py": ["test_garland_evaluates_pyxabs_own_sequool_points", "test_long_run_through_fp_run",
                              "test_noise_free_himmelblau_evaluates_the_reference_points"],
    # The two-process test also needs FEDPNE_MULTIPROCESS_TESTS=1, which .ci/run sets.
    "tests/test_sharding.py": ["test_explicit_sampler_on_four_devices_equals_one", "test_four_devices_equal_one",
                               "test_two_processes_equal_one_device"],
    "tests/test_shared_programs.py": ["test_values_equal_the_objective_built_alone",
                                     "test_synthetic_values_equal_the_function_built_alone",
                                     "test_synthetic_functions_of_one_box_share_a_program_and_run_as_the_shared_objective", "test_a_sweep_that_shares_programs_compiles_once_per_algorithm_and_dimension"],
    "tests/test_soo.py": ["test_garland_evaluates_pyxabs_own_soo_points",
                          "test_noise_free_himmelblau_evaluates_the_reference_points",
                          "test_noisy_regret_and_depth_equal_the_reference_statistically", "test_a_rebuild_merges_the_new_leaves_into_the_sorted_ones"],
    "tests/test_statistics.py": ["test_bernoulli_matches_reference", "test_dp_with_uniform_noise_matches_reference",
                                 "test_explicit_results_do_not_depend_on_capacity",
                                 "test_gaussian_noise_matches_reference", "test_samplers_agree_with_aggregate",
                                 "test_uniform_noise_centre_pulls_match_reference",
                                 "test_uniform_pull_points_alone_equal_batch", "test_uniform_pulls_match_reference"],
    "tests/test_stosoo.py": ["test_garland_evaluates_pyxabs_own_stosoo_points",
                             "test_noise_free_rastrigin_evaluates_the_reference_points",
                             "test_noisy_regret_and_depth_equal_the_reference_statistically"],
    "tests/test_stroquool.py": ["test_garland_evaluates_pyxabs_own_stroquool_points", "test_long_run_through_fp_run",
                                "test_means_are_numpys_pairwise_sums",
                                "test_noise_free_himmelblau_evaluates_the_reference_points",
                                "test_noisy_regret_equals_the_reference_statistically"],
    "tests/test_sweep.py": ["test_cli_file_and_lists_name_the_same_sweep",
                            "test_killed_sweep_resumes_to_the_same_results",
                            "test_other_definition_in_the_folder_is_refused",
                            "test_sweep_equals_grid_and_loader_reads_the_chunks",
                            "test_tiny_memory_budget_gives_many_chunks_and_the_same_results"],
    "tests/test_sweep_cli_properties.py": ["*"],
    "tests/test_sweep_faults.py": ["test_full_disk_during_a_sweep", "test_ctrl_c_keeps_the_finished_chunks_and_a_valid_index"],
    "tests/test_sweep_properties.py": ["*"],
    "tests/test_tree_skeleton.py": ["test_a_refresh_bounded_by_the_rows_in_use_equals_a_whole_table_pass",
                                    "test_best_leaf_breaks_ties_towards_the_last_row_and_honours_its_mask",
                                    "test_capacity_overflow_of_the_fused_path_update",
                                    "test_expand_the_best_leaf_picks_the_predicted_cells_in_1d",
                                    "test_expand_writes_the_children_and_the_callers_row_in_one_scatter",
                                    "test_last_max_is_the_last_largest_masked_row_at_every_size",
                                    "test_longest_side_split_in_2d",
                                    "test_parallel_instances_are_independent_runs_on_their_rounds",
                                    "test_random_split_follows_the_rounds_uniforms",
                                    "test_refresh_runs_between_the_selection_and_the_update_of_round_two_to_the_k",
                                    "test_runs_whose_paths_outgrow_the_first_buffers_are_rerun_with_the_same_numbers",
                                    "test_the_b_chain_by_loop_and_by_scan_equals_the_step_by_step_chain", "test_a_path_longer_than_its_buffer_raises_the_flag"],
    "tests/test_vhct.py": ["test_noise_free_garland_pulls_pyxabs_own_vhct_points",
                           "test_noise_free_himmelblau_pulls_the_reference_points",
                           "test_noisy_garland_pulls_the_reference_points_given_its_rewards",
                           "test_noisy_regret_equals_the_reference_statistically"],
    "tests/test_vpct.py": ["*"],
    "tests/test_vroom.py": ["test_noise_free_himmelblau_evaluates_the_reference_points",
                            "test_noisy_regret_and_depth_equal_the_reference_statistically",
                            "test_the_draw_follows_the_rank_probabilities",
                            "test_through_fp_run_with_the_default_precision"],
    "tests/test_zooming.py": ["test_garland_evaluates_pyxabs_own_zooming_points",
                              "test_noise_free_himmelblau_evaluates_the_reference_points",
                              "test_noisy_regret_equals_the_reference_statistically",
                              "test_outgrown_tables_are_rerun_with_the_same_numbers"],
}

# Cases of gate functions that only the thorough tier runs.
CASES = {
    "tests/test_asktell.py": [f"test_noise_free_stepper_equals_run[[]{name}]" for name in
                              ("hct", "hoo", "doo", "soo", "stosoo", "vhct", "poo", "gpo", "pct", "vpct", "zooming", "vroom",
                               "sequool", "stroquool", "fed1ucb", "fnucb", "kernelts", "gpucb", "bo", "bbo")] +
                             ["test_optimizer_equals_run[[]3]"],
    # The contract's runs (each algorithm's batch, its flags, f* and portability, its recorded run, a
    # seed in a grid): the gate runs them for Fed-PNE, a tree and a GP (CONTRACT_GATE), and a seed in a
    # grid for Fed-PNE and a tree; the thorough tier for all.  Every algorithm's refusals stay in the gate.
    "tests/test_contract.py": [f"{test}[[]{name}]" for name in ALGORITHMS if name not in CONTRACT_GATE
                               for test in ("test_run_by_name_and_curve_shape", "test_seed_in_a_grid_of_two_equals_batch",
                                            "test_program_has_no_processor_dependent_operation",
                                            "test_plain_run_raises_no_flag", "test_global_value_above_f_star_is_reported")]
                              + [f"test_recorded_run_is_unchanged[[]{name}]" for name in RECORDED if name not in CONTRACT_GATE]
                              + [f"test_seed_in_a_grid_of_two_equals_batch[[]{name}]" for name in CONTRACT_GATE
                                 if name not in ("fedpne", "hct")],
    # Fed-PNE against the NumPy reference: the gate keeps M = 3 in one dimension, both splits in three
    # dimensions with k = 3, and the explicit sampler.
    "tests/test_exact.py": ["test_longest_split_matches_reference[[]garland-1-1-*",
                            "test_longest_split_matches_reference[[]garland-1-10-*",
                            "test_longest_split_matches_reference[[]doublesine-*",
                            "test_longest_split_matches_reference[[]himmelblau-*",
                            "test_every_sampler_is_exact_without_noise[[]client-*",
                            "test_longest_split_matches_reference[[]ackley-*",
                            "test_longest_split_matches_reference[[]rastrigin-2-*",
                            "test_random_split_matches_reference_per_seed[[]himmelblau-*",
                            "test_random_split_matches_reference_per_seed[[]ackley-*"],
    # The behaviour fixture: the gate checks Fed-PNE's pulls at uniform points and DP (about 20 s); the
    # other samplers' runs, the random splits (the exact tests check both splits in the gate), Fed1-UCB's
    # Gaussian run, the grid and the sweep are the thorough tier's.
    "tests/test_behaviour.py": [f"test_recorded_part_is_unchanged[[]{part}]" for part in
                                ("fedpne/client-bernoulli", "fedpne/explicit-centre", "fedpne/explicit-gaussian", "fedpne/random-split",
                                 "fedpne/random-split-2d", "baseline/fed1ucb-gaussian", "grid", "sweep")],
    # COCO's values: the gate keeps the first and the last BBOB group's gallery function.
    "tests/test_bbob.py": [f"{test}[[]{f}]" for test in ("test_values_match_coco", "test_f_star_zero_is_attained_at_x_opt")
                           for f in range(1, 25) if f not in (1, 21)],
    "tests/test_errors.py": ["test_nan_from_objective_is_reported[[]kw1]", "test_nan_from_objective_is_reported[[]kw2]"],
    # The tree algorithms' reference cases: one split and rule variant each stays in the gate.
    "tests/test_soo.py": ["test_noise_free_garland_evaluates_the_reference_points[[]True]"],
    "tests/test_doo.py": ["test_noise_free_garland_evaluates_the_reference_points[[]geometric]"],
    "tests/test_gpo.py": ["test_noise_free_himmelblau_evaluates_the_reference_points[[]hoo]"],
    "tests/test_poo.py": ["test_noise_free_himmelblau_evaluates_the_reference_points[[]hoo]"],
    "tests/test_vhct.py": ["test_noise_free_garland_pulls_the_reference_points[[]False]"],
    "tests/test_fed1ucb.py": ["test_noise_free_equals_reference[[]170]"],
    # The reward models: the gate keeps GATE's cases (Gaussian noise at sigma = 0.5, uniform noise, DP
    # noise alone for each sampler).
    "tests/test_rewards.py": [f"test_node_mean_has_the_model_variance[[]{case}]" for case in
                              ("gaussian-aggregate-*", "gaussian-client-*", "gaussian-explicit-*", "gaussian0.5-dp",
                               "uniform-dp", "bernoulli-*")],
    # The GP baselines' noisy runs against their references: the gate keeps all but BBO (46 s).
    "tests/test_gp_baselines.py": ["test_noisy_runs_agree_with_reference_in_distribution[[]bbo]",
                                   *(f"test_a_round_of_picks_conditioned_at_once_equals_one_pick_at_a_time[[]{n}]"
                                     for n in (10, 17, 40))],
    # The prefix sums: the gate keeps one element, one block and a second level of blocks.
    "tests/test_portability.py": [f"test_prefix_sums_are_jnp_cumsums_bits_in_a_fixed_order[[]{n}]"
                                  for n in (2, 16, 32, 100, 257, 1000)]
                                 + [f"test_matvec_is_pairwise_in_an_order_fixed_by_n[[]{case}]"
                                    for case in ("64-64", "64-10", "10-64")],
}


def _name(nodeid: str) -> tuple[str, str]:
    file, _, name = nodeid.partition("::")
    return file, name


def _function_matches(nodeid: str, path: str, pattern: str) -> bool:
    file, name = _name(nodeid)
    return file == path and fnmatch.fnmatchcase(name.partition("[")[0], pattern)


def _case_matches(nodeid: str, path: str, pattern: str) -> bool:
    file, name = _name(nodeid)
    return file == path and fnmatch.fnmatchcase(name, pattern)


def whole(nodeid: str) -> bool:
    """Whether FUNCTIONS names the test function of ``nodeid`` (a node id with or without its case)."""
    path = _name(nodeid)[0]
    return any(_function_matches(nodeid, path, p) for p in FUNCTIONS.get(path, ()))


def thorough(nodeid: str) -> bool:
    """Whether the test ``nodeid`` runs in the thorough tier only."""
    path = _name(nodeid)[0]
    return whole(nodeid) or any(_case_matches(nodeid, path, p) for p in CASES.get(path, ()))


def stale(nodeids) -> list[str]:
    """The entries of FUNCTIONS and CASES that name none of ``nodeids`` (the whole suite's)."""
    nodeids = set(nodeids)
    return ([f"{path}::{p}" for path, patterns in FUNCTIONS.items() for p in patterns
             if not any(_function_matches(n, path, p) for n in nodeids)]
            + [f"{path}::{p}" for path, patterns in CASES.items() for p in patterns
               if not any(_case_matches(n, path, p) for n in nodeids)])
