"""Suite-wide settings: caches (autotuning, model calibration) go to a temporary directory, and
the tests known to take long are marked ``slow`` (``make test-fast`` skips them)."""

import shutil

import pytest

from polyfuse.core.cache import cache_root

#: device verdicts copied from the developer's cache (see _isolated_polyfuse_cache)
PROBE_FILES = ("device_probe.json", "device_speed.json")

#: Tests that take more than a few seconds on a 2-core machine (node-id prefixes).  A test can
#: also say it itself with ``@pytest.mark.slow``.
SLOW = (
    "tests/test_notebooks.py::test_notebook_executes",
    "tests/test_onnx_torch.py::",
    "tests/test_fusion_property.py::",
    "tests/test_uar_vs_bruteforce.py::",
    "tests/test_counts.py::test_examples_match_bruteforce",
    "tests/test_counts.py::test_oplib_kernels_match_bruteforce",
    "tests/test_counts.py::test_generated_nests_all_granularities",
    "tests/test_schedules.py::",
    "tests/test_onnx_cli.py::",
    "tests/test_readme.py::",
    "tests/test_cli.py::test_demo_fuses_bert_qkv_into_one_launch",
    "tests/test_cli.py::test_fuse_tune_reports_variants",
    "tests/test_cli.py::test_roofline_places_program_kernels",
    "tests/test_cli.py::test_fuse_writes_plan_source_report",
    "tests/test_onnx.py::test_model_matches_onnxruntime_fused_and_unfused",
    "tests/test_onnx_ops.py::test_operator_matches_onnxruntime",
    "tests/test_onnx_ops.py::test_mobilenet_block_fuses_and_verifies",
    "tests/test_onnx_ops.py::test_unet_style_block_fuses_and_verifies",
    "tests/test_onnx_ops.py::test_attention_block_with_einsum_fuses_and_verifies",
    "tests/test_onnx_ops.py::test_own_model_guide_commands_run",
    "tests/test_oracle.py::test_example_widths_by_execution",
    "tests/test_autotune.py::",
    "tests/test_uar.py::test_random_chains_against_bruteforce",
    "tests/test_codegen.py::test_code_motion_qkv_tiled_shares_barriers",
    "tests/test_codegen.py::test_planned_examples_verify",
    "tests/test_execute.py::test_examples_match_interpreter",
    "tests/test_autopar.py::test_generated_program_matches_gcc",
    "tests/test_session_cache.py::test_second_process_opens_the_session_from_the_cache",
    "tests/test_session_cache.py::test_run_says_when_it_starts_from_the_cache",
    "tests/test_device_choice.py::test_default_device_is_measured_cached_and_explained",
    "tests/test_device_choice.py::test_pyopencl_ctx_wins",
    "tests/test_drivers.py::test_devices_names_the_driver_and_registers_it",
    "tests/test_scaling.py::test_dask_reports_per_model_failures",
    "tests/test_robustness.py::test_cli_param_beyond_the_budget_plans_symbolically",
    "tests/test_roofline.py::test_quick_roofline_files_and_copy_bandwidth",
    "tests/test_fused_host.py::test_wavefront_loop_nest_is_rewritten",
    "tests/test_fused_host.py::test_rewrite_changes_only_the_calls",
    "tests/test_fused_host.py::test_fused_host_refuses_other_arguments",
    # over 5 s in `pytest -n 2 -m "not slow" --durations=0` on the project's 2-core machine
    # while other jobs shared it: kept out of `make test-fast` so that it stays near the time
    # the README states; `make test` (CI) still runs them
    "tests/fuzz/test_fuzz.py::test_bounded_campaign_has_no_mismatch_traceback_or_stall",
    "tests/test_blocked_consumers.py::test_bundled_models_blocked",
    "tests/test_blocked_consumers.py::test_head_fuses_into_one_launch_and_matches_onnxruntime",
    "tests/test_cli.py::test_analyze_json_contract",
    "tests/test_cli.py::test_fuse_bad_input_is_one_line",
    "tests/test_cli.py::test_fuse_runtime_parameter",
    "tests/test_cli.py::test_kernel_file_the_host_does_not_read_is_an_error",
    "tests/test_cli.py::test_kernel_source_override_builds_the_named_file",
    "tests/test_cli.py::test_parallelize_missing_file",
    "tests/test_cli.py::test_parallelize_writes_host_kernels_report",
    "tests/test_cli.py::test_runtime_parameter_conditions",
    "tests/test_cli_habits.py::test_run_prints_outputs_and_time_and_saves_only_when_asked",
    "tests/test_coarsen.py::test_2d_reduction_with_local_argument",
    "tests/test_coarsen.py::test_barrier_under_group_branch_refused_for_block_accepted_for_thread",
    "tests/test_coarsen.py::test_benchmark_programs_coarsen_and_verify",
    "tests/test_coarsen.py::test_cli_coarsen_writes_report",
    "tests/test_coarsen.py::test_cli_refused_variant_is_one_line_error",
    "tests/test_coarsen.py::test_counted_loops_are_jammed_and_uniform_statements_shared",
    "tests/test_coarsen.py::test_generated_kernels_verify",
    "tests/test_coarsen.py::test_tuner_rows_pruning_illegal_and_cache",
    "tests/test_coarsen.py::test_untuned_run_keeps_the_original",
    "tests/test_codegen.py::test_code_motion_bert_qkv_onnx",
    "tests/test_codegen_models.py::test_models_equal_print_and_parse",
    "tests/test_counts.py::test_count_report_params_fix_local_size_exactly",
    "tests/test_execute.py::test_missing_size_parameter_is_a_clear_error",
    "tests/test_exhaustive.py::",
    "tests/test_fused_host.py::test_a_call_running_launches_of_different_loops_is_refused",
    "tests/test_fused_host.py::test_fused_host_runs_like_the_original",
    "tests/test_hetero_fusion.py::test_independent_kernels_fuse_side_by_side",
    "tests/test_hetero_fusion.py::test_padded_fragments_verify_and_pass_the_checker",
    "tests/test_host_programs.py::test_cpp_references_templates_and_std_string",
    "tests/test_host_programs.py::test_gramschmidt_unrolled_launches_against_the_oracle",
    "tests/test_host_programs.py::test_handson_cpp_fuse_and_verify_through_the_cli",
    "tests/test_host_programs.py::test_handson_cpp_kernel_setarg_ndrange",
    "tests/test_host_programs.py::test_handson_cpp_make_kernel_chain",
    "tests/test_host_programs.py::test_handson_cpp_pi_work_group_size_query",
    "tests/test_host_programs.py::test_parboil_style_harness_and_input_file",
    "tests/test_host_programs.py::test_rodinia_style_run_in_another_file_with_struct_elements",
    "tests/test_host_programs.py::test_rodinia_style_sizes_from_file_are_named_parameters",
    "tests/test_host_programs.py::test_runtime_builds_with_the_hosts_options",
    "tests/test_host_programs.py::test_too_many_unrolled_launches_are_refused_with_a_hint",
    "tests/test_host_programs.py::test_windowed_dependences_equal_the_whole_sequence_flow",
    "tests/test_kernel_records.py::test_a_kernel_builds_from_its_record_after_its_file_is_gone",
    "tests/test_kernel_records.py::test_code_generation_checks_the_target_it_is_given",
    "tests/test_layers.py::test_imports_go_down_the_layers",
    "tests/test_layers.py::test_no_private_name_crosses_units",
    "tests/test_layers.py::test_the_core_loads_no_opencl",
    "tests/test_mathtext.py::test_report_and_summary_row_print_counts_readable",
    "tests/test_microbench.py::test_flops_quick",
    "tests/test_microbench.py::test_local_barrier_launch_stride_quick",
    "tests/test_native_crash.py::",
    "tests/test_onnx.py::test_bert_qkv_plans_to_one_launch",
    "tests/test_onnx.py::test_dynamic_dimension_from_params",
    "tests/test_onnx.py::test_gather_indices_and_where_condition_with_external_data",
    "tests/test_onnx.py::test_missing_and_misshaped_inputs_are_named",
    "tests/test_onnx.py::test_shape_subgraph_is_folded_on_the_host",
    "tests/test_onnx.py::test_weights_are_program_data",
    "tests/test_onnx_ops.py::test_torchscript_pad_subgraph_folds",
    "tests/test_oplib.py::test_broadcasting_binary",
    "tests/test_original.py::",
    "tests/test_perf_model.py::test_quick_calibration_end_to_end",
    "tests/test_robustness.py::test_batch_timeout_names_the_stage",
    "tests/test_robustness.py::test_cli_fuse_survives_a_native_crash_of_the_device_step",
    "tests/test_robustness.py::test_cyclic_graph_error_names_the_node_fully",
    "tests/test_robustness.py::test_deep_but_accepted_nesting_fuses_and_verifies",
    "tests/test_robustness.py::test_host_define_zero_work_group_is_one_line_error",
    "tests/test_robustness.py::test_kernel_access_outside_its_buffer_is_refused",
    "tests/test_robustness.py::test_nan_and_inf_follow_onnxruntime",
    "tests/test_robustness.py::test_non_utf8_host_is_fused_and_rewritten",
    "tests/test_robustness.py::test_operator_kernels_are_preprocessed_once_per_model",
    "tests/test_robustness.py::test_undeclared_local_array_blamed_on_the_kernel_file",
    "tests/test_robustness.py::test_watchdog_cpu_budget_counts",
    "tests/test_robustness.py::test_watchdog_names_the_stage_that_overran",
    "tests/test_robustness.py::test_watchdog_turns_a_native_crash_into_one_line",
    "tests/test_scaling.py::test_cli_cache_hit_profile_and_clear",
    "tests/test_scaling.py::test_outputs_identical_across_runs_cache_and_dask",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.nodeid.startswith(SLOW):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(autouse=True, scope="session")
def _isolated_polyfuse_cache(tmp_path_factory: pytest.TempPathFactory):
    tmp = tmp_path_factory.mktemp("polyfuse-cache")
    # the verdicts on this machine's OpenCL devices are not test state: start from the ones the
    # developer's cache holds, so each test worker does not probe every device again (tens of
    # seconds on a small machine); tests of the probing itself use caches of their own
    for name in PROBE_FILES:
        if (cache_root() / name).is_file():
            shutil.copyfile(cache_root() / name, tmp / name)
    mp = pytest.MonkeyPatch()
    mp.setenv("POLYFUSE_CACHE", str(tmp))
    yield
    mp.undo()
