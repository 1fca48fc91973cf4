"""ONNX's backend node tests through the importer (docs/import.md, "ONNX's node tests").

Every node test case the onnx package generates whose model uses an op the importer maps (the
Constant op aside) is imported, run forward in blockflow and compared with the outputs the
package ships, at the case's own tolerances, as ONNX's backend test runner does. A case that does
not pass is listed in NOT_PASSING with why; the test fails for an unlisted failure and for a
listed case that passes (so the list stays true), and docs/import.md's table is checked to be
the one :func:`node_tests_markdown` writes.

``python tests/test_import_onnx_nodes.py`` prints the outcome of every attempted case;
``--markdown`` prints the doc's section, ``--write`` puts it in docs/import.md, and ``--draft``
prints NOT_PASSING as a run now would write it (refusals and rejections in their own words, the
other failures with their listed reason or, when new, their message to explain).
"""
from __future__ import annotations

import functools
import re
import sys
import textwrap
import warnings
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
import onnx.numpy_helper  # noqa: E402

from blockflow.compile.compiler import compile_project  # noqa: E402
from blockflow.importing.errors import ImportFailure, UnsupportedOps  # noqa: E402
from blockflow.importing.onnx_import import import_model  # noqa: E402
from blockflow.importing.onnx_mapping import mapping_table  # noqa: E402
from blockflow.importing.onnx_read import read_onnx_bytes  # noqa: E402
from blockflow.run.runtime import run  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "import.md"
SECTION = "## ONNX's node tests"


def _listed(*groups) -> dict:
    """{case: (outcome, reason)} from (outcome, reason, [cases]) groups (one reason, many cases)."""
    table = {}
    for outcome, reason, names in groups:
        for name in names:
            assert name not in table, f"{name} is listed twice"
            table[name] = (outcome, reason)
    return table


#: every attempted case that does not pass: outcome ("refused": the import raises UnsupportedOps;
#: "rejected": the reader refuses the file (a dtype a project does not hold); "differs": it runs
#: to other values; "error": it fails otherwise; "needs-block": waits for a block being added on
#: another branch) and why
NOT_PASSING = _listed(
    ('refused', "AveragePool: AveragePool over 3 spatial axes: blockflow's windows are 2-D (NCHW input)",
     ['test_averagepool_3d_default',
      'test_averagepool_3d_dilations_large_count_include_pad_is_0_ceil_mode_is_False',
      'test_averagepool_3d_dilations_large_count_include_pad_is_0_ceil_mode_is_True',
      'test_averagepool_3d_dilations_large_count_include_pad_is_1_ceil_mode_is_False',
      'test_averagepool_3d_dilations_large_count_include_pad_is_1_ceil_mode_is_True',
      'test_averagepool_3d_dilations_small']),
    ('refused', "AveragePool: AveragePool with dilations [2, 2]: blockflow's pooling windows are dense",
     ['test_averagepool_2d_dilations']),
    ('refused', 'BatchNormalization: BatchNormalization in training mode (the statistics outputs): only '
     'inference maps',
     ['test_batchnorm_epsilon_training_mode', 'test_batchnorm_example_training_mode']),
    ('refused', 'Cast: Cast to ONNX type 16, which a project does not hold',
     ['test_cast_FLOAT_to_BFLOAT16']),
    ('refused', 'Cast: Cast to ONNX type 17, which a project does not hold',
     ['test_cast_FLOAT16_to_FLOAT8E4M3FN', 'test_cast_FLOAT_to_FLOAT8E4M3FN',
      'test_cast_no_saturate_FLOAT16_to_FLOAT8E4M3FN', 'test_cast_no_saturate_FLOAT_to_FLOAT8E4M3FN']),
    ('refused', 'Cast: Cast to ONNX type 18, which a project does not hold',
     ['test_cast_FLOAT16_to_FLOAT8E4M3FNUZ', 'test_cast_FLOAT_to_FLOAT8E4M3FNUZ',
      'test_cast_no_saturate_FLOAT16_to_FLOAT8E4M3FNUZ', 'test_cast_no_saturate_FLOAT_to_FLOAT8E4M3FNUZ']),
    ('refused', 'Cast: Cast to ONNX type 19, which a project does not hold',
     ['test_cast_FLOAT16_to_FLOAT8E5M2', 'test_cast_FLOAT_to_FLOAT8E5M2',
      'test_cast_no_saturate_FLOAT16_to_FLOAT8E5M2', 'test_cast_no_saturate_FLOAT_to_FLOAT8E5M2']),
    ('refused', 'Cast: Cast to ONNX type 20, which a project does not hold',
     ['test_cast_FLOAT16_to_FLOAT8E5M2FNUZ', 'test_cast_FLOAT_to_FLOAT8E5M2FNUZ',
      'test_cast_no_saturate_FLOAT16_to_FLOAT8E5M2FNUZ', 'test_cast_no_saturate_FLOAT_to_FLOAT8E5M2FNUZ']),
    ('refused', 'Cast: Cast to ONNX type 21, which a project does not hold',
     ['test_cast_FLOAT16_to_UINT4', 'test_cast_FLOAT_to_UINT4']),
    ('refused', 'Cast: Cast to ONNX type 22, which a project does not hold',
     ['test_cast_FLOAT16_to_INT4', 'test_cast_FLOAT_to_INT4']),
    ('refused', 'Cast: Cast to ONNX type 23, which a project does not hold',
     ['test_cast_FLOAT16_to_FLOAT4E2M1', 'test_cast_FLOAT_to_FLOAT4E2M1']),
    ('refused', 'Cast: Cast to ONNX type 24, which a project does not hold',
     ['test_cast_e8m0_FLOAT16_to_FLOAT8E8M0', 'test_cast_e8m0_FLOAT_to_FLOAT8E8M0']),
    ('refused', 'Cast: Cast to ONNX type 25, which a project does not hold',
     ['test_cast_FLOAT16_to_UINT2', 'test_cast_FLOAT_to_UINT2']),
    ('refused', 'Cast: Cast to ONNX type 26, which a project does not hold',
     ['test_cast_FLOAT16_to_INT2', 'test_cast_FLOAT_to_INT2']),
    ('refused', 'ConstantOfShape: no mapping & If: no mapping',
     ['test_affine_grid_2d_align_corners_expanded', 'test_affine_grid_2d_expanded',
      'test_affine_grid_3d_align_corners_expanded', 'test_affine_grid_3d_expanded']),
    ('refused', "ConvTranspose: ConvTranspose over 3 spatial axes: blockflow's are 2-D (NCHW)",
     ['test_convtranspose_3d']),
    ('refused', 'ConvTranspose: ConvTranspose with group 2',
     ['test_convtranspose_group_2', 'test_convtranspose_group_2_image_3']),
    ('refused', "CumProd: CumProd's axis (input 1) must be a constant; here the model computes it",
     ['test_cumprod_1d', 'test_cumprod_1d_exclusive', 'test_cumprod_1d_int32_exclusive',
      'test_cumprod_1d_reverse', 'test_cumprod_1d_reverse_exclusive', 'test_cumprod_2d_axis_0',
      'test_cumprod_2d_axis_1', 'test_cumprod_2d_int32', 'test_cumprod_2d_negative_axis']),
    ('refused', "CumSum: CumSum's axis (input 1) must be a constant; here the model computes it",
     ['test_cumsum_1d', 'test_cumsum_1d_exclusive', 'test_cumsum_1d_int32_exclusive',
      'test_cumsum_1d_reverse', 'test_cumsum_1d_reverse_exclusive', 'test_cumsum_2d_axis_0',
      'test_cumsum_2d_axis_1', 'test_cumsum_2d_int32', 'test_cumsum_2d_negative_axis']),
    ('refused', "Dropout: Dropout's training_mode (input 2) must be a constant; here the model computes it",
     ['test_training_dropout', 'test_training_dropout_default', 'test_training_dropout_default_mask',
      'test_training_dropout_mask', 'test_training_dropout_zero_ratio',
      'test_training_dropout_zero_ratio_mask']),
    ('refused', "Einsum: Einsum '...ii->...i' repeats a letter in one operand (a diagonal or trace): "
     "blockflow's Einsum takes each letter once per operand",
     ['test_einsum_batch_diagonal']),
    ('refused', "Expand: Expand's shape (input 1) must be a constant; here the model computes it",
     ['test_expand_dim_changed', 'test_expand_dim_unchanged']),
    ('refused', "GatherND: GatherND with batch_dims (TF's GatherNd here takes none)",
     ['test_gathernd_example_int32_batch_dim1']),
    ('refused', 'Loop: no mapping',
     ['test_range_float16_type_positive_delta_expanded', 'test_range_float_type_positive_delta_expanded',
      'test_range_int32_type_negative_delta_expanded']),
    ('refused', "MaxPool: MaxPool over 3 spatial axes: blockflow's windows are 2-D (NCHW input)",
     ['test_maxpool_3d_default', 'test_maxpool_3d_dilations', 'test_maxpool_3d_dilations_use_ref_impl',
      'test_maxpool_3d_dilations_use_ref_impl_large']),
    ('refused', "MaxPool: MaxPool with dilations [2, 2]: blockflow's pooling windows are dense",
     ['test_maxpool_2d_dilations']),
    ('refused', 'MaxPool: MaxPool with storage_order 1 (only the Indices output depends on it, but it is '
     'refused with them)',
     ['test_maxpool_with_argmax_2d_precomputed_strides']),
    ('refused', "MaxPool: MaxPool's Indices output",
     ['test_maxpool_with_argmax_2d_precomputed_pads']),
    ('refused', "Mod: Mod with fmod 1 on floats: C's fmod has no TF op, and FloorMod corrected by the "
     'divisor rounds twice',
     ['test_mod_mixed_sign_float16', 'test_mod_mixed_sign_float32', 'test_mod_mixed_sign_float64']),
    ('refused', "OneHot: OneHot's depth (input 1) must be a constant; here the model computes it",
     ['test_onehot_negative_indices', 'test_onehot_out_of_range_indices', 'test_onehot_with_axis',
      'test_onehot_with_negative_axis', 'test_onehot_without_axis']),
    ('refused', "Pad: Pad's constant_value (input 2) must be a constant; here the model computes it",
     ['test_attention_24_fullymasked_qk_matmul_output_mode3_zero_expanded',
      'test_attention_24_qk_matmul_output_mode3_softmax_precision_expanded',
      'test_attention_4d_causal_nonpad_attn_mask_composition_expanded',
      'test_attention_4d_diff_heads_mask4d_padded_kv_expanded',
      'test_attention_causal_boolmask_nan_robustness_expanded',
      'test_attention_local_window_ext_cache_float16_mask_expanded',
      'test_attention_local_window_ext_cache_rank2_mask_expanded',
      'test_attention_local_window_ext_cache_rank3_head_mask_expanded',
      'test_attention_local_window_ext_cache_rank4_batch_mask_expanded',
      'test_attention_local_window_gqa_rank4_mask_expanded',
      'test_attention_local_window_rank1_boolean_mask_expanded']),
    ('refused', "Pad: Pad's pads (input 1) must be a constant; here the model computes it",
     ['test_center_crop_pad_crop_and_pad_expanded', 'test_center_crop_pad_crop_axes_chw_expanded',
      'test_center_crop_pad_crop_axes_hwc_expanded', 'test_center_crop_pad_crop_expanded',
      'test_center_crop_pad_crop_negative_axes_hwc_expanded', 'test_center_crop_pad_pad_expanded',
      'test_constant_pad', 'test_constant_pad_axes', 'test_constant_pad_negative_axes', 'test_edge_pad',
      'test_reflect_pad', 'test_wrap_pad']),
    ('refused', 'Pow: Pow of int32 to a float32 power (ONNX leaves the rounding back to int32 unsaid)',
     ['test_pow_types_int32_float32']),
    ('refused', 'Pow: Pow of int64 to a float32 power (ONNX leaves the rounding back to int64 unsaid)',
     ['test_pow_types_int64_float32']),
    ('refused', 'QuantizeLinear: no mapping',
     ['test_dynamicquantizelinear_expanded', 'test_dynamicquantizelinear_max_adjusted_expanded',
      'test_dynamicquantizelinear_min_adjusted_expanded']),
    ('refused', 'RandomUniformLike: no mapping',
     ['test_bernoulli_double_expanded', 'test_bernoulli_expanded', 'test_bernoulli_seed_expanded']),
    ('refused', "Range: Range's start, limit and delta must be known while importing (constants); here the "
     'model computes them',
     ['test_blackmanwindow_expanded', 'test_blackmanwindow_symmetric_expanded',
      'test_hammingwindow_expanded', 'test_hammingwindow_symmetric_expanded', 'test_hannwindow_expanded',
      'test_hannwindow_symmetric_expanded', 'test_range_float16_type_positive_delta',
      'test_range_float_type_positive_delta', 'test_range_int32_type_negative_delta']),
    ('refused', 'ReduceL1: the axes (input 1) must be a constant; here the model computes it',
     ['test_reduce_l1_default_axes_keepdims_example', 'test_reduce_l1_default_axes_keepdims_random',
      'test_reduce_l1_do_not_keepdims_example', 'test_reduce_l1_do_not_keepdims_random',
      'test_reduce_l1_empty_set', 'test_reduce_l1_keep_dims_example', 'test_reduce_l1_keep_dims_random',
      'test_reduce_l1_negative_axes_keep_dims_example', 'test_reduce_l1_negative_axes_keep_dims_random']),
    ('refused', 'ReduceL2: the axes (input 1) must be a constant; here the model computes it',
     ['test_reduce_l2_default_axes_keepdims_example', 'test_reduce_l2_default_axes_keepdims_random',
      'test_reduce_l2_do_not_keepdims_example', 'test_reduce_l2_do_not_keepdims_random',
      'test_reduce_l2_empty_set', 'test_reduce_l2_keep_dims_example', 'test_reduce_l2_keep_dims_random',
      'test_reduce_l2_negative_axes_keep_dims_example', 'test_reduce_l2_negative_axes_keep_dims_random']),
    ('refused', 'ReduceLogSum: the axes (input 1) must be a constant; here the model computes it',
     ['test_reduce_log_sum_asc_axes', 'test_reduce_log_sum_default', 'test_reduce_log_sum_desc_axes',
      'test_reduce_log_sum_empty_set', 'test_reduce_log_sum_negative_axes']),
    ('refused', 'ReduceLogSumExp: the axes (input 1) must be a constant; here the model computes it',
     ['test_reduce_log_sum_exp_default_axes_keepdims_example',
      'test_reduce_log_sum_exp_default_axes_keepdims_random',
      'test_reduce_log_sum_exp_do_not_keepdims_example', 'test_reduce_log_sum_exp_do_not_keepdims_random',
      'test_reduce_log_sum_exp_empty_set', 'test_reduce_log_sum_exp_keepdims_example',
      'test_reduce_log_sum_exp_keepdims_random', 'test_reduce_log_sum_exp_negative_axes_keepdims_example',
      'test_reduce_log_sum_exp_negative_axes_keepdims_random']),
    ('refused', 'ReduceMax: the axes (input 1) must be a constant; here the model computes it',
     ['test_reduce_max_bool_inputs', 'test_reduce_max_do_not_keepdims_example',
      'test_reduce_max_do_not_keepdims_random', 'test_reduce_max_empty_set',
      'test_reduce_max_empty_set_bool', 'test_reduce_max_keepdims_example',
      'test_reduce_max_keepdims_random', 'test_reduce_max_negative_axes_keepdims_example',
      'test_reduce_max_negative_axes_keepdims_random']),
    ('refused', 'ReduceMean: the axes (input 1) must be a constant; here the model computes it',
     ['test_reduce_mean_default_axes_keepdims_example', 'test_reduce_mean_default_axes_keepdims_random',
      'test_reduce_mean_do_not_keepdims_example', 'test_reduce_mean_do_not_keepdims_random',
      'test_reduce_mean_keepdims_example', 'test_reduce_mean_keepdims_random',
      'test_reduce_mean_negative_axes_keepdims_example', 'test_reduce_mean_negative_axes_keepdims_random']),
    ('refused', 'ReduceMin: the axes (input 1) must be a constant; here the model computes it',
     ['test_reduce_min_bool_inputs', 'test_reduce_min_do_not_keepdims_example',
      'test_reduce_min_do_not_keepdims_random', 'test_reduce_min_empty_set',
      'test_reduce_min_keepdims_example', 'test_reduce_min_keepdims_random',
      'test_reduce_min_negative_axes_keepdims_example', 'test_reduce_min_negative_axes_keepdims_random']),
    ('refused', 'ReduceProd: the axes (input 1) must be a constant; here the model computes it',
     ['test_reduce_prod_do_not_keepdims_example', 'test_reduce_prod_do_not_keepdims_random',
      'test_reduce_prod_empty_set', 'test_reduce_prod_keepdims_example',
      'test_reduce_prod_keepdims_random', 'test_reduce_prod_negative_axes_keepdims_example',
      'test_reduce_prod_negative_axes_keepdims_random']),
    ('refused', 'ReduceSum: the axes (input 1) must be a constant; here the model computes it',
     ['test_reduce_l1_default_axes_keepdims_example_expanded',
      'test_reduce_l1_default_axes_keepdims_random_expanded',
      'test_reduce_l1_do_not_keepdims_example_expanded', 'test_reduce_l1_do_not_keepdims_random_expanded',
      'test_reduce_l1_empty_set_expanded', 'test_reduce_l1_keep_dims_example_expanded',
      'test_reduce_l1_keep_dims_random_expanded',
      'test_reduce_l1_negative_axes_keep_dims_example_expanded',
      'test_reduce_l1_negative_axes_keep_dims_random_expanded',
      'test_reduce_l2_default_axes_keepdims_example_expanded',
      'test_reduce_l2_default_axes_keepdims_random_expanded',
      'test_reduce_l2_do_not_keepdims_example_expanded', 'test_reduce_l2_do_not_keepdims_random_expanded',
      'test_reduce_l2_empty_set_expanded', 'test_reduce_l2_keep_dims_example_expanded',
      'test_reduce_l2_keep_dims_random_expanded',
      'test_reduce_l2_negative_axes_keep_dims_example_expanded',
      'test_reduce_l2_negative_axes_keep_dims_random_expanded', 'test_reduce_log_sum_asc_axes_expanded',
      'test_reduce_log_sum_default_expanded', 'test_reduce_log_sum_desc_axes_expanded',
      'test_reduce_log_sum_empty_set_expanded',
      'test_reduce_log_sum_exp_default_axes_keepdims_example_expanded',
      'test_reduce_log_sum_exp_default_axes_keepdims_random_expanded',
      'test_reduce_log_sum_exp_do_not_keepdims_example_expanded',
      'test_reduce_log_sum_exp_do_not_keepdims_random_expanded',
      'test_reduce_log_sum_exp_empty_set_expanded', 'test_reduce_log_sum_exp_keepdims_example_expanded',
      'test_reduce_log_sum_exp_keepdims_random_expanded',
      'test_reduce_log_sum_exp_negative_axes_keepdims_example_expanded',
      'test_reduce_log_sum_exp_negative_axes_keepdims_random_expanded',
      'test_reduce_log_sum_negative_axes_expanded', 'test_reduce_sum_default_axes_keepdims_example',
      'test_reduce_sum_default_axes_keepdims_random', 'test_reduce_sum_do_not_keepdims_example',
      'test_reduce_sum_do_not_keepdims_random', 'test_reduce_sum_empty_axes_input_noop',
      'test_reduce_sum_empty_axes_input_noop_example', 'test_reduce_sum_empty_set',
      'test_reduce_sum_empty_set_non_reduced_axis_zero', 'test_reduce_sum_keepdims_example',
      'test_reduce_sum_keepdims_random', 'test_reduce_sum_negative_axes_keepdims_example',
      'test_reduce_sum_negative_axes_keepdims_random',
      'test_reduce_sum_square_default_axes_keepdims_example_expanded',
      'test_reduce_sum_square_default_axes_keepdims_random_expanded',
      'test_reduce_sum_square_do_not_keepdims_example_expanded',
      'test_reduce_sum_square_do_not_keepdims_random_expanded',
      'test_reduce_sum_square_empty_set_expanded', 'test_reduce_sum_square_keepdims_example_expanded',
      'test_reduce_sum_square_keepdims_random_expanded',
      'test_reduce_sum_square_negative_axes_keepdims_example_expanded',
      'test_reduce_sum_square_negative_axes_keepdims_random_expanded']),
    ('refused', 'ReduceSumSquare: the axes (input 1) must be a constant; here the model computes it',
     ['test_reduce_sum_square_default_axes_keepdims_example',
      'test_reduce_sum_square_default_axes_keepdims_random',
      'test_reduce_sum_square_do_not_keepdims_example', 'test_reduce_sum_square_do_not_keepdims_random',
      'test_reduce_sum_square_empty_set', 'test_reduce_sum_square_keepdims_example',
      'test_reduce_sum_square_keepdims_random', 'test_reduce_sum_square_negative_axes_keepdims_example',
      'test_reduce_sum_square_negative_axes_keepdims_random']),
    ('refused', "Reshape: Reshape's shape (input 1) must be a constant; here the model computes it",
     ['test_reshape_allowzero_reordered', 'test_reshape_extended_dims', 'test_reshape_negative_dim',
      'test_reshape_negative_extended_dims', 'test_reshape_one_dim', 'test_reshape_reduced_dims',
      'test_reshape_reordered_all_dims', 'test_reshape_reordered_last_dims',
      'test_reshape_zero_and_negative_dim', 'test_reshape_zero_dim']),
    ('refused', "Resize: Resize with coordinate_transformation_mode 'tf_crop_and_resize' (a region and an "
     'extrapolation value)',
     ['test_resize_tf_crop_and_resize', 'test_resize_tf_crop_and_resize_axes_2_3',
      'test_resize_tf_crop_and_resize_axes_3_2', 'test_resize_tf_crop_and_resize_extrapolation_value']),
    ('refused', "Resize: Resize's scales (input 2) must be a constant; here the model computes it",
     ['test_resize_downsample_scales_cubic', 'test_resize_downsample_scales_cubic_A_n0p5_exclude_outside',
      'test_resize_downsample_scales_cubic_align_corners',
      'test_resize_downsample_scales_cubic_antialias', 'test_resize_downsample_scales_linear',
      'test_resize_downsample_scales_linear_align_corners',
      'test_resize_downsample_scales_linear_antialias',
      'test_resize_downsample_scales_linear_half_pixel_symmetric',
      'test_resize_downsample_scales_nearest', 'test_resize_upsample_scales_cubic',
      'test_resize_upsample_scales_cubic_A_n0p5_exclude_outside',
      'test_resize_upsample_scales_cubic_align_corners', 'test_resize_upsample_scales_cubic_asymmetric',
      'test_resize_upsample_scales_linear', 'test_resize_upsample_scales_linear_align_corners',
      'test_resize_upsample_scales_linear_half_pixel_symmetric', 'test_resize_upsample_scales_nearest',
      'test_resize_upsample_scales_nearest_axes_2_3', 'test_resize_upsample_scales_nearest_axes_3_2']),
    ('refused', "Resize: Resize's sizes (input 3) must be a constant; here the model computes it",
     ['test_resize_downsample_sizes_cubic', 'test_resize_downsample_sizes_cubic_antialias',
      'test_resize_downsample_sizes_linear_antialias',
      'test_resize_downsample_sizes_linear_pytorch_half_pixel', 'test_resize_downsample_sizes_nearest',
      'test_resize_downsample_sizes_nearest_not_larger',
      'test_resize_downsample_sizes_nearest_not_smaller', 'test_resize_upsample_sizes_cubic',
      'test_resize_upsample_sizes_nearest', 'test_resize_upsample_sizes_nearest_axes_2_3',
      'test_resize_upsample_sizes_nearest_axes_3_2', 'test_resize_upsample_sizes_nearest_ceil_half_pixel',
      'test_resize_upsample_sizes_nearest_floor_align_corners',
      'test_resize_upsample_sizes_nearest_not_larger', 'test_resize_upsample_sizes_nearest_not_smaller',
      'test_resize_upsample_sizes_nearest_round_prefer_ceil_asymmetric']),
    ('refused', 'Scan: no mapping',
     ['test_linear_attention_decode_step_expanded', 'test_linear_attention_delta_expanded',
      'test_linear_attention_explicit_scale_expanded', 'test_linear_attention_fp16_expanded',
      'test_linear_attention_gated_delta_beta_scalar_expanded',
      'test_linear_attention_gated_delta_expanded', 'test_linear_attention_gated_delta_gqa_expanded',
      'test_linear_attention_gated_delta_mqa_expanded', 'test_linear_attention_gated_expanded',
      'test_linear_attention_gated_per_head_decay_expanded', 'test_linear_attention_linear_expanded',
      'test_linear_attention_linear_t1_no_past_expanded',
      'test_linear_attention_no_past_explicit_zeros_expanded',
      'test_linear_attention_prefill_with_past_expanded']),
    ('refused', "ScatterElements: ScatterElements with reduction 'max'",
     ['test_scatter_elements_with_reduction_max']),
    ('refused', "ScatterElements: ScatterElements with reduction 'min'",
     ['test_scatter_elements_with_reduction_min']),
    ('refused', "ScatterElements: ScatterElements with reduction 'mul'",
     ['test_scatter_elements_with_reduction_mul']),
    ('refused', "ScatterND: ScatterND with reduction 'max'",
     ['test_scatternd_max', 'test_scatternd_max_with_element_indices']),
    ('refused', "ScatterND: ScatterND with reduction 'min'",
     ['test_scatternd_min', 'test_scatternd_min_with_element_indices']),
    ('refused', "ScatterND: ScatterND with reduction 'mul'",
     ['test_scatternd_multiply']),
    ('refused', "Slice: Slice's starts (input 1) must be a constant; here the model computes it",
     ['test_slice', 'test_slice_default_axes', 'test_slice_default_steps', 'test_slice_end_out_of_bounds',
      'test_slice_neg', 'test_slice_neg_steps', 'test_slice_negative_axes',
      'test_slice_start_out_of_bounds']),
    ('refused', 'Slice: the rank of input 0 is not known (shape inference could not type it)',
     ['test_rotary_embedding_interleaved_expanded',
      'test_rotary_embedding_no_position_ids_interleaved_expanded',
      'test_rotary_embedding_with_interleaved_rotary_dim_expanded']),
    ('refused', "Split: Split's sizes (input 1) must be a constant; here the model computes it",
     ['test_split_variable_parts_1d_opset13', 'test_split_variable_parts_1d_opset18',
      'test_split_variable_parts_2d_opset13', 'test_split_variable_parts_2d_opset18',
      'test_split_variable_parts_default_axis_opset13', 'test_split_variable_parts_default_axis_opset18',
      'test_split_zero_size_splits_opset13', 'test_split_zero_size_splits_opset18']),
    ('refused', 'Split: the rank of input 0 is not known (shape inference could not type it)',
     ['test_rotary_embedding_3d_input_expanded', 'test_rotary_embedding_expanded',
      'test_rotary_embedding_no_position_ids_expanded',
      'test_rotary_embedding_no_position_ids_rotary_dim_expanded',
      'test_rotary_embedding_with_rotary_dim_expanded']),
    ('refused', "Squeeze: Squeeze's axes (input 1) must be a constant; here the model computes it",
     ['test_squeeze', 'test_squeeze_negative_axes']),
    ('refused', "Tile: Tile's repeats (input 1) must be a constant; here the model computes it",
     ['test_tile', 'test_tile_precomputed']),
    ('refused', "TopK: TopK's k (input 1) must be a constant; here the model computes it",
     ['test_top_k', 'test_top_k_negative_axis', 'test_top_k_same_values', 'test_top_k_same_values_2d',
      'test_top_k_same_values_largest', 'test_top_k_smallest']),
    ('refused', "Trilu: Trilu's k (input 1) must be a constant; here the model computes it",
     ['test_tril_neg', 'test_tril_out_neg', 'test_tril_out_pos', 'test_tril_pos', 'test_tril_square_neg',
      'test_tril_zero', 'test_triu_neg', 'test_triu_one_row', 'test_triu_out_neg_out',
      'test_triu_out_pos', 'test_triu_pos', 'test_triu_square_neg', 'test_triu_zero']),
    ('refused', "Unsqueeze: Unsqueeze's axes (input 1) must be a constant; here the model computes it",
     ['test_unsqueeze_axis_0', 'test_unsqueeze_axis_1', 'test_unsqueeze_axis_2',
      'test_unsqueeze_negative_axes', 'test_unsqueeze_three_axes', 'test_unsqueeze_two_axes',
      'test_unsqueeze_unsorted_axes']),
    ('refused', "Upsample: Upsample's scales (input 1) must be a constant; here the model computes it",
     ['test_upsample_nearest']),
    ('rejected', 'a graph input of BFLOAT16, a dtype a project does not hold',
     ['test_attention_3d_causal_bf16_expanded', 'test_attention_4d_attn_mask_causal_bf16_expanded',
      'test_attention_4d_causal_bf16_expanded', 'test_attention_4d_causal_padded_kv_bf16_expanded',
      'test_attention_4d_padded_kv_bf16_expanded', 'test_cast_BFLOAT16_to_FLOAT',
      'test_castlike_BFLOAT16_to_FLOAT', 'test_castlike_BFLOAT16_to_FLOAT_expanded',
      'test_castlike_FLOAT_to_BFLOAT16', 'test_castlike_FLOAT_to_BFLOAT16_expanded', 'test_celu_bfloat16',
      'test_celu_bfloat16_expanded', 'test_einsum_batch_matmul_bfloat16', 'test_einsum_sum_bfloat16',
      'test_einsum_transpose_bfloat16', 'test_onehot_with_bfloat16_values',
      'test_range_bfloat16_type_positive_delta', 'test_range_bfloat16_type_positive_delta_expanded']),
    ('rejected', 'a graph input of FLOAT4E2M1, a dtype a project does not hold',
     ['test_cast_FLOAT4E2M1_to_FLOAT', 'test_cast_FLOAT4E2M1_to_FLOAT16',
      'test_castlike_FLOAT16_to_FLOAT4E2M1', 'test_castlike_FLOAT16_to_FLOAT4E2M1_expanded',
      'test_castlike_FLOAT4E2M1_to_FLOAT', 'test_castlike_FLOAT4E2M1_to_FLOAT16',
      'test_castlike_FLOAT4E2M1_to_FLOAT16_expanded', 'test_castlike_FLOAT4E2M1_to_FLOAT_expanded',
      'test_castlike_FLOAT_to_FLOAT4E2M1', 'test_castlike_FLOAT_to_FLOAT4E2M1_expanded']),
    ('rejected', 'a graph input of FLOAT8E4M3FN, a dtype a project does not hold',
     ['test_cast_FLOAT8E4M3FN_to_FLOAT', 'test_cast_FLOAT8E4M3FN_to_FLOAT16',
      'test_castlike_FLOAT16_to_FLOAT8E4M3FN', 'test_castlike_FLOAT16_to_FLOAT8E4M3FN_expanded',
      'test_castlike_FLOAT8E4M3FN_to_FLOAT', 'test_castlike_FLOAT8E4M3FN_to_FLOAT16',
      'test_castlike_FLOAT8E4M3FN_to_FLOAT16_expanded', 'test_castlike_FLOAT8E4M3FN_to_FLOAT_expanded',
      'test_castlike_FLOAT_to_FLOAT8E4M3FN', 'test_castlike_FLOAT_to_FLOAT8E4M3FN_expanded',
      'test_castlike_no_saturate_FLOAT16_to_FLOAT8E4M3FN',
      'test_castlike_no_saturate_FLOAT16_to_FLOAT8E4M3FN_expanded',
      'test_castlike_no_saturate_FLOAT_to_FLOAT8E4M3FN',
      'test_castlike_no_saturate_FLOAT_to_FLOAT8E4M3FN_expanded']),
    ('rejected', 'a graph input of FLOAT8E4M3FNUZ, a dtype a project does not hold',
     ['test_cast_FLOAT8E4M3FNUZ_to_FLOAT', 'test_cast_FLOAT8E4M3FNUZ_to_FLOAT16',
      'test_castlike_FLOAT16_to_FLOAT8E4M3FNUZ', 'test_castlike_FLOAT16_to_FLOAT8E4M3FNUZ_expanded',
      'test_castlike_FLOAT8E4M3FNUZ_to_FLOAT', 'test_castlike_FLOAT8E4M3FNUZ_to_FLOAT16',
      'test_castlike_FLOAT8E4M3FNUZ_to_FLOAT16_expanded',
      'test_castlike_FLOAT8E4M3FNUZ_to_FLOAT_expanded', 'test_castlike_FLOAT_to_FLOAT8E4M3FNUZ',
      'test_castlike_FLOAT_to_FLOAT8E4M3FNUZ_expanded',
      'test_castlike_no_saturate_FLOAT16_to_FLOAT8E4M3FNUZ',
      'test_castlike_no_saturate_FLOAT16_to_FLOAT8E4M3FNUZ_expanded',
      'test_castlike_no_saturate_FLOAT_to_FLOAT8E4M3FNUZ',
      'test_castlike_no_saturate_FLOAT_to_FLOAT8E4M3FNUZ_expanded']),
    ('rejected', 'a graph input of FLOAT8E5M2, a dtype a project does not hold',
     ['test_cast_FLOAT8E5M2_to_FLOAT', 'test_cast_FLOAT8E5M2_to_FLOAT16',
      'test_castlike_FLOAT16_to_FLOAT8E5M2', 'test_castlike_FLOAT16_to_FLOAT8E5M2_expanded',
      'test_castlike_FLOAT8E5M2_to_FLOAT', 'test_castlike_FLOAT8E5M2_to_FLOAT16',
      'test_castlike_FLOAT8E5M2_to_FLOAT16_expanded', 'test_castlike_FLOAT8E5M2_to_FLOAT_expanded',
      'test_castlike_FLOAT_to_FLOAT8E5M2', 'test_castlike_FLOAT_to_FLOAT8E5M2_expanded',
      'test_castlike_no_saturate_FLOAT16_to_FLOAT8E5M2',
      'test_castlike_no_saturate_FLOAT16_to_FLOAT8E5M2_expanded',
      'test_castlike_no_saturate_FLOAT_to_FLOAT8E5M2',
      'test_castlike_no_saturate_FLOAT_to_FLOAT8E5M2_expanded']),
    ('rejected', 'a graph input of FLOAT8E5M2FNUZ, a dtype a project does not hold',
     ['test_cast_FLOAT8E5M2FNUZ_to_FLOAT', 'test_cast_FLOAT8E5M2FNUZ_to_FLOAT16',
      'test_castlike_FLOAT16_to_FLOAT8E5M2FNUZ', 'test_castlike_FLOAT16_to_FLOAT8E5M2FNUZ_expanded',
      'test_castlike_FLOAT8E5M2FNUZ_to_FLOAT', 'test_castlike_FLOAT8E5M2FNUZ_to_FLOAT16',
      'test_castlike_FLOAT8E5M2FNUZ_to_FLOAT16_expanded',
      'test_castlike_FLOAT8E5M2FNUZ_to_FLOAT_expanded', 'test_castlike_FLOAT_to_FLOAT8E5M2FNUZ',
      'test_castlike_FLOAT_to_FLOAT8E5M2FNUZ_expanded',
      'test_castlike_no_saturate_FLOAT16_to_FLOAT8E5M2FNUZ',
      'test_castlike_no_saturate_FLOAT16_to_FLOAT8E5M2FNUZ_expanded',
      'test_castlike_no_saturate_FLOAT_to_FLOAT8E5M2FNUZ',
      'test_castlike_no_saturate_FLOAT_to_FLOAT8E5M2FNUZ_expanded']),
    ('rejected', 'a graph input of FLOAT8E8M0, a dtype a project does not hold',
     ['test_cast_e8m0_FLOAT8E8M0_to_FLOAT', 'test_cast_e8m0_FLOAT8E8M0_to_FLOAT16']),
    ('rejected', 'a graph input of INT2, a dtype a project does not hold',
     ['test_cast_INT2_to_FLOAT', 'test_cast_INT2_to_FLOAT16', 'test_cast_INT2_to_INT8',
      'test_castlike_FLOAT16_to_INT2', 'test_castlike_FLOAT16_to_INT2_expanded',
      'test_castlike_FLOAT_to_INT2', 'test_castlike_FLOAT_to_INT2_expanded',
      'test_castlike_INT2_to_FLOAT', 'test_castlike_INT2_to_FLOAT16',
      'test_castlike_INT2_to_FLOAT16_expanded', 'test_castlike_INT2_to_FLOAT_expanded',
      'test_castlike_INT2_to_INT8', 'test_castlike_INT2_to_INT8_expanded']),
    ('rejected', 'a graph input of INT4, a dtype a project does not hold',
     ['test_cast_INT4_to_FLOAT', 'test_cast_INT4_to_FLOAT16', 'test_cast_INT4_to_INT8',
      'test_castlike_FLOAT16_to_INT4', 'test_castlike_FLOAT16_to_INT4_expanded',
      'test_castlike_FLOAT_to_INT4', 'test_castlike_FLOAT_to_INT4_expanded',
      'test_castlike_INT4_to_FLOAT', 'test_castlike_INT4_to_FLOAT16',
      'test_castlike_INT4_to_FLOAT16_expanded', 'test_castlike_INT4_to_FLOAT_expanded',
      'test_castlike_INT4_to_INT8', 'test_castlike_INT4_to_INT8_expanded']),
    ('rejected', 'a graph input of STRING, a dtype a project does not hold',
     ['test_equal_string', 'test_equal_string_broadcast']),
    ('rejected', 'a graph input of UINT16, a dtype a project does not hold',
     ['test_add_uint16', 'test_div_uint16', 'test_equal_uint16', 'test_greater_equal_uint16',
      'test_greater_equal_uint16_expanded', 'test_greater_uint16', 'test_less_equal_uint16',
      'test_less_equal_uint16_expanded', 'test_less_uint16', 'test_max_uint16', 'test_min_uint16',
      'test_mod_uint16', 'test_mul_uint16', 'test_sub_uint16']),
    ('rejected', 'a graph input of UINT2, a dtype a project does not hold',
     ['test_cast_UINT2_to_FLOAT', 'test_cast_UINT2_to_FLOAT16', 'test_cast_UINT2_to_UINT8',
      'test_castlike_FLOAT16_to_UINT2', 'test_castlike_FLOAT16_to_UINT2_expanded',
      'test_castlike_FLOAT_to_UINT2', 'test_castlike_FLOAT_to_UINT2_expanded',
      'test_castlike_UINT2_to_FLOAT', 'test_castlike_UINT2_to_FLOAT16',
      'test_castlike_UINT2_to_FLOAT16_expanded', 'test_castlike_UINT2_to_FLOAT_expanded',
      'test_castlike_UINT2_to_UINT8', 'test_castlike_UINT2_to_UINT8_expanded']),
    ('rejected', 'a graph input of UINT32, a dtype a project does not hold',
     ['test_add_uint32', 'test_div_uint32', 'test_equal_uint32', 'test_greater_equal_uint32',
      'test_greater_equal_uint32_expanded', 'test_greater_uint32', 'test_less_equal_uint32',
      'test_less_equal_uint32_expanded', 'test_less_uint32', 'test_max_uint32', 'test_min_uint32',
      'test_mod_uint32', 'test_mul_uint32', 'test_pow_types_float32_uint32', 'test_sub_uint32']),
    ('rejected', 'a graph input of UINT4, a dtype a project does not hold',
     ['test_cast_UINT4_to_FLOAT', 'test_cast_UINT4_to_FLOAT16', 'test_cast_UINT4_to_UINT8',
      'test_castlike_FLOAT16_to_UINT4', 'test_castlike_FLOAT16_to_UINT4_expanded',
      'test_castlike_FLOAT_to_UINT4', 'test_castlike_FLOAT_to_UINT4_expanded',
      'test_castlike_UINT4_to_FLOAT', 'test_castlike_UINT4_to_FLOAT16',
      'test_castlike_UINT4_to_FLOAT16_expanded', 'test_castlike_UINT4_to_FLOAT_expanded',
      'test_castlike_UINT4_to_UINT8', 'test_castlike_UINT4_to_UINT8_expanded']),
    ('rejected', 'a graph input of UINT64, a dtype a project does not hold',
     ['test_add_uint64', 'test_div_uint64', 'test_equal_uint64', 'test_greater_equal_uint64',
      'test_greater_equal_uint64_expanded', 'test_greater_uint64', 'test_less_equal_uint64',
      'test_less_equal_uint64_expanded', 'test_less_uint64', 'test_max_uint64', 'test_min_uint64',
      'test_mod_uint64', 'test_mul_uint64', 'test_pow_types_float32_uint64', 'test_sub_uint64',
      'test_top_k_uint64']),
    ('rejected', 'a graph input that is not a tensor (optional_type)',
     ['test_identity_opt']),
    ('rejected', 'a graph input that is not a tensor (sequence_type)',
     ['test_identity_sequence']),
    ('rejected', 'opset 1: the import reads opset 9 and later',
     ['test_not_2d', 'test_not_3d', 'test_not_4d']),
    ('rejected', 'opset 7: the import reads opset 9 and later',
     ['test_and2d', 'test_and3d', 'test_and4d', 'test_and_bcast3v1d', 'test_and_bcast3v2d',
      'test_and_bcast4v2d', 'test_and_bcast4v3d', 'test_and_bcast4v4d', 'test_or2d', 'test_or3d',
      'test_or4d', 'test_or_bcast3v1d', 'test_or_bcast3v2d', 'test_or_bcast4v2d', 'test_or_bcast4v3d',
      'test_or_bcast4v4d', 'test_xor2d', 'test_xor3d', 'test_xor4d', 'test_xor_bcast3v1d',
      'test_xor_bcast3v2d', 'test_xor_bcast4v2d', 'test_xor_bcast4v3d', 'test_xor_bcast4v4d']),
)

#: cases of constant_input_cases() that do not pass with those inputs made constants, and why
CONSTANT_NOT_PASSING: dict = {}

OUTCOMES = ("refused", "rejected", "differs", "error", "needs-block")


@functools.lru_cache(maxsize=None)
def all_cases() -> list:
    """Every node test case the onnx package generates (collected once: it takes seconds)."""
    from onnx.backend.test.case.node import collect_testcases
    with warnings.catch_warnings():   # the generators divide by zero on purpose (empty reductions)
        warnings.simplefilter("ignore", RuntimeWarning)
        return collect_testcases(None)


@functools.lru_cache(maxsize=None)
def attempted_cases() -> dict:
    """{name: case} of the node test cases using an op the importer maps."""
    table = mapping_table()
    cases = {}
    for case in all_cases():
        ops = {n.op_type for n in case.model.graph.node if n.domain in ("", "ai.onnx")} - {"Constant"}
        if ops & set(table):
            cases[case.name] = case
    return cases


def _close(name: str, got: np.ndarray, want: np.ndarray, rtol: float, atol: float) -> str | None:
    """Why ``got`` is not ``want`` (None when it is, as ONNX's runner compares)."""
    if got.dtype.kind != want.dtype.kind:
        return f"{name}: dtype {got.dtype} where {want.dtype} is expected"
    if got.shape != want.shape:
        return f"{name}: shape {list(got.shape)} where {list(want.shape)} is expected"
    if want.dtype.kind in "fc":
        bad = ~np.isclose(got, want, rtol=rtol, atol=atol, equal_nan=True)
    else:
        bad = got != want
    if bad.any():
        i = tuple(int(v) for v in np.argwhere(bad)[0])
        return f"{name}: {int(bad.sum())} of {want.size} values differ (at {list(i)}: {got[i]!r}, expected {want[i]!r})"
    return None


def _array(value) -> np.ndarray:
    """A data set's value as an array (some cases hold TensorProtos)."""
    if isinstance(value, onnx.TensorProto):
        return onnx.numpy_helper.to_array(value)
    return np.asarray(value)


def refusal(exc: UnsupportedOps) -> str:
    """What the import refused, without node names: "Op: reason & ..." (the table's reason)."""
    return " & ".join(f"{op}: {reason}" for op, uses in sorted(exc.ops.items())
                     for reason in sorted({r for r, _ in uses}))


def _graph_inputs(model) -> list:
    initialized = {i.name for i in model.graph.initializer}
    return [i.name for i in model.graph.input if i.name not in initialized]


def outcome(case, model=None, data_sets=None) -> tuple[str, str]:
    """("passed", "") or (outcome, what happened) for one case (its model replaced by ``model``
    and its data by ``data_sets`` when given)."""
    proto = model or case.model
    try:
        read = read_onnx_bytes(proto.SerializeToString(), case.name)
    except ImportFailure as exc:
        return "rejected", str(exc)
    try:
        project, report = import_model(read, "case")
    except UnsupportedOps as exc:
        return "refused", refusal(exc)
    except ImportFailure as exc:   # a compile failure is the import's bug; anything else the file's
        return ("error" if "does not compile" in str(exc) else "rejected"), str(exc)
    except Exception as exc:  # noqa: BLE001 - any other failure is this case's outcome
        return "error", f"import: {type(exc).__name__}: {exc}"
    program = compile_project(project)
    names = _graph_inputs(case.model)
    outs = [o.name for o in proto.graph.output]
    for inputs, expected in data_sets or case.data_sets:
        feeds = {report.inputs[n]: _array(v) for n, v in zip(names, inputs) if n in report.inputs}
        fetch = [report.outputs[n] for n in outs]
        try:
            result = run(program, feeds, fetch=fetch, record=False, check_numerics=False)
        except Exception as exc:  # noqa: BLE001
            return "error", f"run: {type(exc).__name__}: {exc}"
        for n, node, want in zip(outs, fetch, expected):
            why = _close(n, np.asarray(result.value(node)), _array(want), case.rtol, case.atol)
            if why:
                return "differs", why
    return "passed", ""


def with_constant_inputs(case):
    """The case's model with every graph input but the first made an initializer holding its
    first data set's value: the mappings of uses the import refuses only because an axis, a
    shape or a count is computed are checked on the same numbers."""
    model = onnx.ModelProto()
    model.CopyFrom(case.model)
    inputs = dict(zip(_graph_inputs(case.model), case.data_sets[0][0]))
    made = _graph_inputs(case.model)[1:]
    kept = [vi for vi in model.graph.input if vi.name not in made]
    del model.graph.input[:]
    model.graph.input.extend(kept)
    model.graph.initializer.extend(onnx.numpy_helper.from_array(_array(inputs[n]), n) for n in made)
    return model


def counts() -> Counter:
    got = Counter(attempted=len(attempted_cases()))
    for name in attempted_cases():
        got[NOT_PASSING[name][0] if name in NOT_PASSING else "passed"] += 1
    return got


_OUTCOME_TEXT = {
    "refused": "the import refuses the use by name: no faithful mapping",
    "rejected": "the reader refuses the file: a dtype a project does not hold, or an opset before 9",
    "differs": "imports and runs, to other values",
    "error": "fails otherwise",
    "needs-block": "waits for a block being added on another branch",
}


def node_tests_markdown() -> str:
    """docs/import.md's node-test section: the counts and the non-passing cases by reason."""
    c = counts()
    constant = constant_input_cases()

    def para(text: str) -> list:
        return textwrap.wrap(text, 100, break_on_hyphens=False) + [""]
    lines = [SECTION, ""]
    lines += para(f"The onnx package (here {onnx.__version__}) generates about {_collected()} backend node test "
                  f"cases. Each is a model of one node (or of an op's function body, expanded), with its inputs "
                  f"and the outputs expected. `tests/test_import_onnx_nodes.py` takes every case whose model "
                  f"uses an op the import maps (Constant aside). It imports the model, runs it forward, and "
                  f"compares each output with the expected one at the case's tolerances, dtype kind and shape "
                  f"included. Every case that does not pass is in the table below, with why. The test fails "
                  f"for a failure the table does not list, and for a case it lists that passes.")
    lines += [f"- attempted: {c['attempted']}", f"- passed: {c['passed']}"]
    lines += [f"- {o}: {c[o]} ({_OUTCOME_TEXT[o]})" for o in OUTCOMES if c[o]] + [""]
    lines += para(f"{len(constant)} cases are refused only because an input the mapping needs to know (an "
                  f"axis, a shape, a count) is a graph input. They run again with those inputs made constants: "
                  f"{len(constant) - len(CONSTANT_NOT_PASSING)} pass. "
                  + " ".join(f"`{n}` does not: {why}." for n, why in sorted(CONSTANT_NOT_PASSING.items())))
    lines += para("The test also checks, in float64 against central differences, the gradient through each "
                  "mapping made of several blocks (normalizations, losses, Resize, ConvTranspose, scatters and "
                  "gathers, activations); and, against onnx's reference evaluator, uses the cases leave out "
                  "(negative integers in Div and Mod, a constant depth or k, TopK's smallest along an axis).")
    by_reason: dict = {}
    for name, (o, reason) in NOT_PASSING.items():
        by_reason.setdefault((o, reason), []).append(name)
    lines += ["| outcome | why | cases |", "|---|---|---|"]
    for (o, reason), names in sorted(by_reason.items(), key=lambda kv: (OUTCOMES.index(kv[0][0]), kv[0][1])):
        shown = ", ".join(f"`{n[len('test_'):]}`" for n in sorted(names))
        lines.append(f"| {o} | {reason.replace('|', '/')} | {shown} |")
    return "\n".join(lines) + "\n"


def _collected() -> str:
    return f"{len(all_cases()) // 100 * 100:,}"


@pytest.mark.parametrize("name", sorted(attempted_cases()))
def test_node_case(name):
    got, why = outcome(attempted_cases()[name])
    listed = NOT_PASSING.get(name)
    if got == "passed":
        assert listed is None, f"{name} passes now: take it out of NOT_PASSING ({listed})"
    elif listed is None:
        pytest.fail(f"{name}: {got}: {why}")
    else:
        assert listed[0] in (got, "needs-block"), f"{name} is listed as {listed[0]} but is {got}: {why}"
        if got == "refused" and listed[0] == "refused":
            assert listed[1] == why, f"{name} is refused for another reason now: {why}"


def constant_input_cases() -> list:
    """The cases refused only because an input the mapping needs known is a graph input."""
    return sorted(name for name, (o, reason) in NOT_PASSING.items()
                  if o == "refused" and all("must be a constant" in part and "training_mode" not in part
                                            for part in reason.split(" & ")))


@pytest.mark.parametrize("name", constant_input_cases())
def test_node_case_with_constant_inputs(name):
    case = attempted_cases()[name]
    got, why = outcome(case, with_constant_inputs(case), case.data_sets[:1])
    listed = CONSTANT_NOT_PASSING.get(name)
    if got == "passed":
        assert listed is None, f"{name} passes with constant inputs now: take it out of CONSTANT_NOT_PASSING"
    else:
        assert listed is not None, f"{name} with constant inputs: {got}: {why}"


#: cases whose mappings are several blocks: their gradients, through the imported diagram in
#: float64, are checked against central differences (the blocks' own are checked by test_blocks)
GRADIENT_CASES = ["test_layer_normalization_4d_axis1", "test_group_normalization_example",
                  "test_instancenorm_example", "test_mvn", "test_nllloss_NCd1_weight_ii",
                  "test_nllloss_NCd1d2_with_weight_reduction_mean", "test_sce_NCd1_mean_weight_negative_ii",
                  "test_gather_elements_negative_indices", "test_celu", "test_selu_example", "test_elu_example",
                  "test_mish", "test_swish", "test_thresholdedrelu_example", "test_averagepool_1d_default",
                  "test_maxpool_1d_default", "test_depthtospace_crd_mode_example", "test_spacetodepth_example",
                  "test_softmax_axis_0", "test_resize_upsample_scales_cubic_A_n0p5_exclude_outside",
                  "test_resize_downsample_scales_linear_antialias", "test_resize_upsample_sizes_nearest_axes_3_2",
                  "test_rms_normalization_3d_axis1_epsilon", "test_lpnormalization_default",
                  "test_reduce_log_sum_exp_keepdims_random", "test_scatternd", "test_scatter_elements_with_axis",
                  "test_scatternd_add", "test_gathernd_example_float32", "test_cumprod_2d_axis_1",
                  "test_convtranspose_pads", "test_convtranspose_output_shape", "test_convtranspose_1d",
                  "test_convtranspose_autopad_same", "test_convtranspose_dilations"]


def _float64(model):
    """``model`` with its float32 inputs, outputs and initializers made float64, but those ONNX
    fixes as float32 (Resize's scales, LayerNormalization's Mean and InvStdDev): the model stays
    one onnx's strict shape inference, which the import runs, accepts."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    del out.graph.value_info[:]
    fixed = {n.input[2] for n in out.graph.node if n.op_type == "Resize" and len(n.input) > 2}
    fixed |= {o for n in out.graph.node if n.op_type == "LayerNormalization" for o in n.output[1:]}
    for vi in [*out.graph.input, *out.graph.output]:
        if vi.type.tensor_type.elem_type == onnx.TensorProto.FLOAT and vi.name not in fixed:
            vi.type.tensor_type.elem_type = onnx.TensorProto.DOUBLE
    for i, t in enumerate(out.graph.initializer):
        if t.data_type == onnx.TensorProto.FLOAT and t.name not in fixed:
            out.graph.initializer[i].CopyFrom(onnx.numpy_helper.from_array(
                onnx.numpy_helper.to_array(t).astype(np.float64), t.name))
    return out


@pytest.mark.parametrize("name", GRADIENT_CASES)
def test_gradient_through_mapping(name):
    case = attempted_cases()[name]
    rng = np.random.default_rng(17)
    values = dict(zip(_graph_inputs(case.model), case.data_sets[0][0]))
    # the case's floats moved off any kink (a 0 of Relu-like ops, a threshold) by 0.05 to 0.1
    values = {n: _array(v).astype(np.float64) + rng.uniform(0.05, 0.1, np.shape(v)) * rng.choice([-1, 1], np.shape(v))
              if _array(v).dtype == np.float32 else _array(v) for n, v in values.items()}
    model = with_constant_inputs(case) if name in constant_input_cases() else case.model
    check_gradient(_float64(model), values, rng)


def test_gradient_through_gather_pads():
    """Edge and wrap Pad (Gathers of the entries copied), on a float64 model of its own."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 3, 4))
    for mode in ("edge", "wrap"):
        model = _one_node("Pad", {"x": x}, {"pads": np.array([0, 2, 1, 0, 1, 3], np.int64)}, 19, mode=mode)
        y = check_gradient(model, {"x": x}, rng)
        want = np.pad(x, [(0, 0), (2, 1), (1, 3)], mode="edge" if mode == "edge" else "wrap")
        np.testing.assert_array_equal(y, want)


def _one_node(op: str, inputs: dict, consts: dict, opset: int, outputs: int = 1, **attrs):
    """A model of one ``op`` node reading graph ``inputs`` ({name: array}) and initializers
    ``consts``; its outputs y0, y1, ..."""
    h = onnx.helper
    names = [f"y{i}" for i in range(outputs)]
    node = h.make_node(op, [*inputs, *consts], names, **attrs)
    graph = h.make_graph(
        [node], op, [h.make_tensor_value_info(n, h.np_dtype_to_tensor_dtype(v.dtype), v.shape)
                     for n, v in inputs.items()],
        [h.make_tensor_value_info(n, onnx.TensorProto.UNDEFINED, None) for n in names],
        [onnx.numpy_helper.from_array(np.asarray(v), n) for n, v in consts.items()])
    return h.make_model(graph, opset_imports=[h.make_opsetid("", opset)])


def _reference_uses():
    """Uses the node tests leave out (negative integers, a constant depth or k), each checked
    against the onnx package's reference evaluator on random data."""
    rng = np.random.default_rng(3)
    a = rng.integers(-20, 20, (4, 5)).astype(np.int32)
    b = rng.choice([-7, -3, -1, 1, 2, 5], (4, 5)).astype(np.int32)
    idx = rng.integers(-4, 4, (2, 3)).astype(np.int64)
    x = rng.standard_normal((3, 4, 5)).astype(np.float32)
    return [
        ("Div-int-signs", {"a": a, "b": b}, {}, 13, {}),
        ("Mod-fmod0-int", {"a": a, "b": b}, {}, 13, {"fmod": 0}),
        ("Mod-fmod1-int", {"a": a, "b": b}, {}, 13, {"fmod": 1}),
        ("OneHot-negative", {"i": idx}, {"d": np.array(4, np.int64), "v": np.array([2.0, 7.0], np.float32)},
         11, {"axis": 1}),
        ("Trilu-lower-k", {"x": x}, {"k": np.array(-1, np.int64)}, 14, {"upper": 0}),
        ("Trilu-upper-k", {"x": x}, {"k": np.array(2, np.int64)}, 14, {}),
        ("ReduceSum-axes", {"x": x}, {"axes": np.array([0, -1], np.int64)}, 13, {"keepdims": 0}),
        ("Split-uneven", {"x": x}, {}, 18, {"axis": 2, "num_outputs": 2, "outputs": 2}),
        ("TopK-axis1-smallest", {"x": x}, {"k": np.array([3], np.int64)}, 11, {"axis": 1, "largest": 0,
                                                                              "outputs": 2}),
        ("GatherElements-axis1", {"x": x, "i": rng.integers(-4, 4, (3, 2, 5)).astype(np.int64)}, {}, 13,
         {"axis": 1}),
    ]


@pytest.mark.parametrize("use", _reference_uses(), ids=lambda u: u[0])
def test_mapping_against_onnx_reference(use):
    from onnx.reference import ReferenceEvaluator
    label, inputs, consts, opset, attrs = use
    model = _one_node(label.split("-")[0], inputs, consts, opset, **attrs)
    wanted = ReferenceEvaluator(model).run(None, inputs)
    project, report = import_model(read_onnx_bytes(model.SerializeToString(), label), "case")
    feeds = {report.inputs[n]: v for n, v in inputs.items()}
    fetch = [report.outputs[o.name] for o in model.graph.output]
    result = run(compile_project(project), feeds, fetch=fetch, record=False)
    for node, want in zip(fetch, wanted):
        got = result.value(node)
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-6)


def test_hardmax_before_opset_13_is_over_the_flattened_trailing_axes():
    """Hardmax-11 coerces its input to 2-D at axis (the onnx package's reference evaluator
    computes opset 13's, along the axis alone, whatever the opset)."""
    x = np.random.default_rng(4).standard_normal((3, 4, 5)).astype(np.float32)
    model = _one_node("Hardmax", {"x": x}, {}, 11, axis=1)
    project, report = import_model(read_onnx_bytes(model.SerializeToString(), "hardmax"), "case")
    out = report.outputs["y0"]
    got = run(compile_project(project), {report.inputs["x"]: x}, fetch=[out], record=False).value(out)
    rows = x.reshape(3, 20)
    want = (np.arange(20) == rows.argmax(axis=1)[:, None]).astype(np.float32).reshape(x.shape)
    np.testing.assert_array_equal(got, want)


def check_gradient(model, values: dict, rng) -> np.ndarray:
    """Import ``model``, run it on ``values`` ({graph input: array}) and check the gradient of a
    random projection of its first output with respect to each float64 input at a few entries
    against central differences; the output."""
    project, report = import_model(read_onnx_bytes(model.SerializeToString(), "model"), "case")
    program = compile_project(project)
    feeds = {report.inputs[n]: v for n, v in values.items() if n in report.inputs}
    out = report.outputs[model.graph.output[0].name]
    y = run(program, feeds, fetch=[out], record=False, check_numerics=False).value(out)
    seed = rng.standard_normal(np.shape(y))
    wrt = [p for p, v in feeds.items() if v.dtype == np.float64]
    grads = run(program, feeds, target=out, grad_seed=seed, wrt=wrt, record=False,
                check_numerics=False).variable_grads

    def loss(fed):
        return float(np.sum(run(program, fed, fetch=[out], record=False, check_numerics=False).value(out) * seed))

    for p in wrt:
        x = feeds[p]
        for flat in rng.choice(x.size, size=min(x.size, 5), replace=False):
            i = np.unravel_index(flat, x.shape)
            up, down = x.copy(), x.copy()
            up[i] += 1e-6
            down[i] -= 1e-6
            numeric = (loss({**feeds, p: up}) - loss({**feeds, p: down})) / 2e-6
            assert np.isclose(grads[p][i], numeric, rtol=1e-4, atol=1e-6), (p, i, grads[p][i], numeric)
    return y


def test_listed_cases_are_attempted():
    assert set(NOT_PASSING) <= set(attempted_cases()), sorted(set(NOT_PASSING) - set(attempted_cases()))
    assert all(o in OUTCOMES and reason for o, reason in NOT_PASSING.values())


def _section_span(text: str) -> tuple:
    """(start, end) of the node-test section in docs/import.md's ``text``."""
    start = text.index(SECTION)
    nxt = re.search(r"^## ", text[start + len(SECTION):], re.M)
    return start, (start + len(SECTION) + nxt.start()) if nxt else len(text)


def test_doc_section_is_current():
    text = DOC.read_text(encoding="utf-8")
    start, end = _section_span(text)
    assert text[start:end].rstrip("\n") + "\n" == node_tests_markdown(), \
        "docs/import.md's node tests section is stale: python tests/test_import_onnx_nodes.py --write"


def rejection(case, message: str) -> str:
    """Why the reader refuses a case's file, in the table's words."""
    opset = next((o.version for o in case.model.opset_import if o.domain in ("", "ai.onnx")), None)
    if "older than" in message:
        return f"opset {opset}: the import reads opset 9 and later"
    for vi in case.model.graph.input:
        kind = vi.type.WhichOneof("value")
        if kind != "tensor_type":
            return f"a graph input that is not a tensor ({kind})"
        elem = vi.type.tensor_type.elem_type
        if onnx.helper.tensor_dtype_to_np_dtype(elem).name not in _HELD:
            return f"a graph input of {onnx.TensorProto.DataType.Name(elem)}, a dtype a project does not hold"
    return message


_HELD = {"float32", "uint8", "int8", "int16", "int32", "int64", "bool", "float16", "float64"}


def draft_table() -> str:
    """NOT_PASSING as it would be written from a run now: refusals and rejections in their
    own words, the others with their listed reason (or the failure, to be explained)."""
    groups: dict = {}
    for name, case in sorted(attempted_cases().items()):
        got, why = outcome(case)
        if got == "passed":
            continue
        listed = NOT_PASSING.get(name)
        if got == "rejected":
            why = rejection(case, why)
        elif listed is not None and (got != "refused" or listed[0] != "refused"):
            got, why = listed
        groups.setdefault((got, why), []).append(name)
    lines = []
    for (got, why), names in sorted(groups.items(), key=lambda kv: (OUTCOMES.index(kv[0][0]), kv[0][1])):
        parts = [repr(p) for p in textwrap.wrap(why, 90, drop_whitespace=False)]
        lines.append(f"    ({got!r}, " + "\n     ".join(parts) + ",")
        lines.append("     [" + "\n      ".join(textwrap.wrap(", ".join(repr(n) for n in names), 100)) + "]),")
    return "\n".join(lines)


if __name__ == "__main__":
    if "--markdown" in sys.argv:
        print(node_tests_markdown(), end="")
    elif "--write" in sys.argv:
        doc = DOC.read_text(encoding="utf-8")
        a, b = _section_span(doc)
        DOC.write_text(doc[:a] + node_tests_markdown() + "\n" + doc[b:], encoding="utf-8")
    elif "--draft" in sys.argv:
        print(draft_table())
    else:
        for case_name, case in sorted(attempted_cases().items()):
            o, what = outcome(case)
            print(f"{case_name}\t{o}\t{' '.join(what.split())[:400]}")
