"""Q-gym: layer expressions, SumMerge, pulsed search, kernels, HE counts, bad input."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from eqdsl import ir
from eqdsl.apps.qgym import he
from eqdsl.apps.qgym.baselines import count_ops, factorised_count, plain_count
from eqdsl.apps.qgym.kernels import CpuLayout, cpu_kernel, direct_conv, tiled_cpu_kernel
from eqdsl.apps.qgym.layer import LayerSpec, QuantizedLayer, layer_expressions, layer_from_params, synthetic_weights
from eqdsl.apps.qgym.study import Search, check_exact, compare
from eqdsl.apps.qgym.summerge import merge_pairs, start_program, summerge
from eqdsl.apps.qgym.tiles import default_c_block, tile_layer
from eqdsl.apps.qgym.vectors import default_vector_width, mean_live_values
from eqdsl.diagnostics import EqdslError, Span
from eqdsl.frontend import load_language

from conftest import ROOT

LANG = load_language("qgym")


def _layer(R=3, S=3, C=4, K=6, Q=3, tpr=0, seed=0) -> QuantizedLayer:
    spec = LayerSpec(R, S, C, K, Q, tpr)
    return QuantizedLayer(spec, synthetic_weights(LayerSpec(R, S, C, K, Q), seed))


def test_synthetic_weights_take_q_distinct_nonzero_levels():
    layer = _layer(Q=5)
    assert layer.weights.shape == (6, 4, 3, 3)
    assert len(layer.levels) == 5 and 0 not in layer.levels


@pytest.mark.parametrize("tpr", [0, 2])
def test_layer_expressions_equal_the_plain_layer_on_integers(tpr):
    layer = _layer(tpr=tpr)
    program = layer_expressions(LANG, layer)
    assert len(program.roots) == layer.spec.K * (tpr + 1)
    assert check_exact(program, layer)
    wrong = QuantizedLayer(layer.spec, layer.weights + (np.arange(layer.weights.size).reshape(layer.weights.shape) == 7))
    assert not check_exact(program, wrong)  # the check can fail


def test_merge_pairs_merges_the_most_frequent_pair_until_none_repeats():
    merged = merge_pairs([{0, 1, 2}, {0, 1, 3}, {0, 1}, {2, 3}], 4)
    assert merged.merges == [(0, 1)]
    assert merged.groups == [[2, 4], [3, 4], [4], [2, 3]]


def test_summerge_is_exact_and_beats_factorisation():
    layer = _layer(C=8, K=8, Q=2)
    program = summerge(LANG, layer)
    assert check_exact(program, layer)
    assert count_ops(program).cost < factorised_count(layer).cost < layer.spec.plain_cost


@pytest.mark.parametrize("zeros, tpr", [(0.0, 0), (0.0, 1), (0.3, 0), (0.3, 2)])
def test_level_shift_is_exact_with_and_without_zero_weights(zeros, tpr):
    layer = _layer(C=6, K=8, Q=3, tpr=tpr)
    weights = layer.weights.copy()
    weights[np.random.default_rng(1).random(weights.shape) < zeros] = 0
    layer = QuantizedLayer(layer.spec, weights)
    shifted = summerge(LANG, layer, shift=True)
    assert check_exact(shifted, layer)
    wrong = QuantizedLayer(layer.spec, weights + (np.arange(weights.size).reshape(weights.shape) == 5))
    assert not check_exact(shifted, wrong)


def test_level_shift_drops_each_kernels_largest_group_for_one_shared_window_sum():
    # kernel k weighs x_k by 2 and the other three by 1: Σ = (2 − 1)·x_k + 1·T, T = x0 + x1 + x2 + x3
    weights = (np.ones((4, 4), dtype=np.int64) + np.eye(4, dtype=np.int64)).reshape(4, 4, 1, 1)
    layer = QuantizedLayer(LayerSpec(1, 1, 4, 4, 2), weights)
    shifted, plain = summerge(LANG, layer, shift=True), summerge(LANG, layer)
    assert check_exact(shifted, layer) and check_exact(plain, layer)
    # T: 3 adds; per kernel one add; muls: 1·x_k four times and one shared 1·T
    assert (count_ops(shifted).adds, count_ops(shifted).muls) == (7, 5)
    assert (count_ops(plain).adds, count_ops(plain).muls) == (10, 8)  # 2 merges, 4 group sums, 4 combines
    assert count_ops(start_program(LANG, layer, "shifted")) == count_ops(shifted)


def test_shifted_start_keeps_summerge_where_the_shift_does_not_pay():
    # every kernel's largest group is its zero group: c = 0, the shift changes nothing
    weights = np.array([[0, 0, 0, 2], [0, 0, 3, 0]]).reshape(2, 4, 1, 1)
    layer = QuantizedLayer(LayerSpec(1, 1, 4, 2, 2), weights)
    assert count_ops(start_program(LANG, layer, "shifted")) == count_ops(summerge(LANG, layer))


def test_plain_and_factorised_counts():
    layer = _layer(R=1, S=1, C=4, K=2, Q=2)
    layer = QuantizedLayer(layer.spec, np.array([[1, 1, 2, 2], [3, 3, 3, 3]]).reshape(2, 4, 1, 1))
    assert layer.spec.plain_ops == 2 * 7 and layer.spec.plain_cost == 2 * 11
    f = factorised_count(layer)
    assert (f.adds, f.muls) == (2 + 1 + 3, 2 + 1)


def test_pulsed_search_is_exact_and_never_worse_than_its_start():
    layer = _layer(R=1, S=1, C=12, K=8, Q=2)
    start = count_ops(layer_expressions(LANG, layer)).cost
    res = compare(LANG, layer, [Search("pulsed", "greedy-dag", epochs=3, explore_iter=2)])
    assert res.methods["pulsed"].exact and res.methods["summerge"].exact
    assert res.methods["pulsed"].ops.cost <= start


def test_search_started_from_summerge_never_ends_above_it():
    layer = _layer(R=1, S=1, C=12, K=8, Q=3)
    res = compare(LANG, layer, [Search("seeded", "greedy-dag", epochs=2, explore_iter=2, start="summerge"),
                                Search("from-shift", "greedy-dag", epochs=2, explore_iter=2, start="shifted")])
    assert res.methods["seeded"].exact and res.methods["from-shift"].exact and res.methods["shifted"].exact
    assert res.methods["seeded"].ops.cost <= res.methods["summerge"].ops.cost
    assert res.methods["from-shift"].ops.cost <= res.methods["shifted"].ops.cost < res.methods["summerge"].ops.cost


@pytest.mark.parametrize("tpr", [0, 1])
def test_search_from_the_plain_layer_with_the_greedy_programs_unioned_ends_at_or_below_them(tpr):
    # greedy-dag alone picks per class by its own count and returns more than the shifted program
    # here; the loaded programs are starts every extraction of the initial e-graph keeps
    layer = _layer(R=3, S=3, C=4, K=6, Q=2, tpr=tpr)
    union = Search("union", "greedy-dag", epochs=1, explore_iter=1, alternatives=("summerge", "shifted"))
    res = compare(LANG, layer, [union, Search("alone", "greedy-dag", epochs=1, explore_iter=1)])
    assert res.methods["union"].exact
    assert res.methods["union"].ops.cost <= res.methods["shifted"].ops.cost < res.methods["summerge"].ops.cost
    assert res.methods["alone"].ops.cost > res.methods["shifted"].ops.cost


@pytest.mark.parametrize("tpr", [0, 1])
def test_cpu_kernel_matches_direct_convolution(tpr):
    layer = _layer(C=3, K=4, Q=3, tpr=tpr)
    kernel = cpu_kernel(summerge(LANG, layer), layer.spec)
    for width in (9, 21, 34, 50):  # rows of 7, 19, 32, 48 outputs: under one block, a shifted last block, whole blocks
        x = np.random.default_rng(width).integers(-127, 128, size=(3, 7, width)).astype(np.float32)
        got = kernel(x)
        assert np.array_equal(got.astype(np.int64), direct_conv(x.astype(np.int64), layer.weights))


def test_small_programs_keep_llvms_lanes_and_large_ones_get_eight_or_four():
    small = summerge(LANG, _layer(C=3, K=4, Q=3))
    large = summerge(LANG, _layer(R=5, S=5, C=16, K=16, Q=2))
    spill_at_8 = mean_live_values(large) * 8 * 4
    assert (default_vector_width(small), default_vector_width(large, int(spill_at_8) + 1)) == (0, 8)
    assert default_vector_width(large, int(spill_at_8) - 1) == 4  # passes L1 at 8 lanes, fits at 4
    assert default_vector_width(large, int(spill_at_8 / 2) - 1) == 8  # fits at neither: 8


@pytest.mark.parametrize("shape", [(2, 7, 9), (3, 2, 9), (3, 7, 2), (3, 7)])
def test_cpu_kernel_refuses_an_input_of_the_wrong_shape(shape):
    layer = _layer(C=3, K=4, Q=3)
    with pytest.raises(ValueError, match=r"expected an input \[C=3, H ≥ 3, W ≥ 3\]"):
        cpu_kernel(summerge(LANG, layer), layer.spec)(np.zeros(shape, dtype=np.float32))


def test_mean_live_values_counts_each_value_from_its_statement_to_its_last_use():
    x, add, w = ir.TermNode("x", (0, 0, 0)), ir.TermNode("add", (ir.Child(0), ir.Child(1))), ir.TermNode("w", (3,))
    nodes = (x, ir.TermNode("x", (0, 1, 0)), add, w, ir.TermNode("mul", (ir.Child(3), ir.Child(2))))
    program = ir.Program("p", nodes, (4, 2), Span("<test>", 0, 0))
    # statements 0..4; live spans: x0 0→2, x1 1→2, add 2→5 (a root: stored at the end), w literal, mul 4→5
    assert mean_live_values(program) == (2 + 1 + 3 + 1) / 5


def test_cpu_kernel_rejects_a_vector_width_the_grid_cannot_hold():
    layer = _layer(C=3, K=4, Q=3)
    with pytest.raises(ValueError, match="vector_width must be 0 or a divisor of 16, got 3"):
        cpu_kernel(summerge(LANG, layer), layer.spec, vector_width=3)


@pytest.mark.parametrize("width,tpr", [(9, 0), (18, 0), (34, 1), (64, 0), (41, 2)])
def test_cpu_layout_blocks_cover_every_output_and_stay_inside_the_input(width, tpr):
    layout = CpuLayout(_layer(C=3, K=4, Q=3, tpr=tpr).spec, 7, width)
    starts = layout.block_starts
    written = {s + p for s in starts for p in range(layout.span)}
    assert written == set(range(layout.row)) and layout.row >= layout.wo
    assert min(starts) == 0 and max(starts) + layout.span - 1 + layout.spec.S - 1 == layout.width - 1
    assert (layout.width == width) == (layout.wo >= layout.span)  # a copy only for rows under one block


def test_cpu_kernel_reads_the_input_in_place_and_leaves_it_unchanged():
    layer = _layer(C=3, K=4, Q=3)
    x = np.random.default_rng(5).integers(-127, 128, size=(3, 7, 40)).astype(np.float32)
    before = x.copy()
    got = cpu_kernel(summerge(LANG, layer), layer.spec)(x)
    assert CpuLayout.of(x, layer.spec).prepared(x).base is x  # no padded copy
    assert np.array_equal(x, before) and got.shape == (4, 5, 38)
    assert np.array_equal(got.astype(np.int64), direct_conv(x.astype(np.int64), layer.weights))


@pytest.mark.parametrize("tpr", [0, 1])
def test_tiled_cpu_kernel_sums_its_input_tiles_to_the_convolution(tpr):
    layer = _layer(C=6, K=5, Q=2, tpr=tpr)
    tiling = tile_layer(LANG, layer, c_block=2, k_block=3)  # 3 input tiles (a chain over both buffers) × 2 output tiles
    assert sorted((t.k0, t.c0, t.spec.K, t.spec.C) for t in tiling.tiles) == [
        (k0, c0, 3 if k0 == 0 else 2, 2) for k0 in (0, 3) for c0 in (0, 2, 4)]
    kernel = tiled_cpu_kernel(tiling)
    for width in (9, 40):  # one widened block; a shifted last block recomputing outputs the one before wrote
        x = np.random.default_rng(width).integers(-127, 128, size=(6, 7, width)).astype(np.float32)
        assert np.array_equal(kernel(x).astype(np.int64), direct_conv(x.astype(np.int64), layer.weights))


def test_a_tiling_counts_its_tiles_operations_and_the_partial_sums():
    layer = _layer(C=6, K=5, Q=2)
    tiling = tile_layer(LANG, layer, c_block=4)  # input tiles of 4 and 2 channels, all 5 outputs
    first, second = (count_ops(t.program) for t in tiling.input_tiles(0))
    assert tiling.count().adds == first.adds + second.adds + 5 and tiling.count().muls == first.muls + second.muls


def test_default_c_block_keeps_a_tiles_window_within_200_inputs():
    blocks = [default_c_block(LayerSpec(r, r, c, 8, 2)) for r, c in [(1, 32), (3, 16), (3, 64), (5, 16), (7, 8)]]
    assert blocks == [32, 16, 16, 8, 4]


def test_a_block_larger_than_the_layer_falls_back_with_a_warning():
    layer = _layer(C=3, K=4, Q=2)
    with pytest.warns(UserWarning, match="c_block 8 is larger than the layer's 3 channels: using 3"):
        tiling = tile_layer(LANG, layer, c_block=8)
    assert len(tiling.tiles) == 1 and tiling.tiles[0].spec == layer.spec
    with pytest.raises(ValueError, match="k_block must be at least 1, got -1"):
        tile_layer(LANG, layer, k_block=-1)


def test_cuda_kernel_matches_direct_convolution_in_the_simulator():
    script = """
import numpy as np
from eqdsl.frontend import load_language
from eqdsl.apps.qgym.kernels import cuda_kernel, direct_conv
from eqdsl.apps.qgym.layer import LayerSpec, QuantizedLayer, layer_expressions, synthetic_weights
spec = LayerSpec(2, 2, 2, 4, 2, 1)
layer = QuantizedLayer(spec, synthetic_weights(LayerSpec(2, 2, 2, 4, 2), 0))
x = np.random.default_rng(0).integers(-127, 128, size=(2, 4, 5)).astype(np.float32)
from eqdsl.kernels.cuda import time_launch
kernel = cuda_kernel(layer_expressions(load_language("qgym"), layer), spec, channel_groups=2)
got = kernel(x)
assert time_launch(kernel.launch, (kernel.device_input(x),), runs=2, warmup=1) >= 0  # the simulator times 0
reused = kernel.launch(kernel.device_input(x))
kernel.launch(kernel.device_input(2 * x), out=reused)  # the timing path writes into a given buffer
assert np.array_equal(reused.copy_to_host()[:, :, :got.shape[2]], 2 * got)
assert np.array_equal(got.astype(np.int64), direct_conv(x.astype(np.int64), layer.weights)), (got, direct_conv(x.astype(np.int64), layer.weights))
print("ok")
"""
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    done = subprocess.run([sys.executable, "-c", script], env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "ok" in done.stdout, done.stderr[-2000:]


def test_he_counts_and_bfv_run():
    layer = _layer(R=1, S=1, C=6, K=3, Q=2)
    program = summerge(LANG, layer)
    dense = he.dense_he_counts(layer.spec)
    assert (dense.pt_ct_mul, dense.ct_ct_add, dense.pt_ct_add) == (18, 15, 3)
    counts = he.he_counts(program)
    assert counts.pt_ct_mul == count_ops(program).muls and counts.ct_ct_add == count_ops(program).adds
    ok, _ = he.run_bfv(program, layer.weights, batch=4)
    assert ok


def test_weight_file_errors(tmp_path):
    params = {"R": 3, "S": 3, "C": 2, "K": 2, "Q": 2, "weights": "w.npy"}
    np.save(tmp_path / "w.npy", np.ones((2, 2, 3, 2), dtype=np.int8))
    with pytest.raises(EqdslError, match=r"expected shape \[K, C, R, S\] = \[2, 2, 3, 3\], found \[2, 2, 3, 2\]"):
        layer_from_params(params, tmp_path)
    np.save(tmp_path / "w.npy", np.arange(36).reshape(2, 2, 3, 3))
    with pytest.raises(EqdslError, match="at most Q = 2 distinct non-zero weight values, found 35"):
        layer_from_params(params, tmp_path)
    np.save(tmp_path / "w.npy", np.full((2, 2, 3, 3), 0.5))
    with pytest.raises(EqdslError, match="expected integer weights"):
        layer_from_params(params, tmp_path)
    np.save(tmp_path / "w.npy", np.tile([1, -1], 18).reshape(2, 2, 3, 3))
    assert layer_from_params(params, tmp_path).levels == (-1, 1)


@pytest.mark.parametrize("program, message", [
    ("{builder: conv_layer, R: 3, S: 3, C: 2, K: 2}", "program.Q: error: missing layer size Q"),
    ("{builder: conv_layer, R: 3, S: 3, C: 2, K: 2, Q: 2, stride: 2}", "program.stride: error: unknown parameter"),
    ("{builder: conv_layer, R: 0, S: 3, C: 2, K: 2, Q: 2}", "program.R: error: expected an int ≥ 1, got 0"),
    ("{builder: conv_layer, R: 1, S: 1, C: 2, K: 2, Q: 2, weights: nope.npy}", "cannot read weight file"),
    ("{builder: conv_layer, R: 1, S: 1, C: 2, K: 2, Q: 2, start: best}", "program.start: error: expected one of layer, summerge, shifted"),
    ("{builder: conv_layer, R: 1, S: 1, C: 2, K: 2, Q: 2, alternatives: summerge}",
     "program.alternatives: error: expected a list of layer, summerge, shifted, got 'summerge'"),
])
def test_bad_layer_config_is_a_clean_error(tmp_path, run_cli, program, message):
    (tmp_path / "c.yaml").write_text(f"ruleset: qgym\nprogram: {program}\nschedule: {{kind: pulsed}}\n")
    code, _, err = run_cli("run", tmp_path / "c.yaml", "--output", tmp_path / "out", "--quiet")
    assert code == 2 and message in err and "Traceback" not in err, err


@pytest.mark.parametrize("schedule, message", [
    ("{kind: saturate, epochs: 2}", "schedule.epochs: error: `epochs` applies to `kind: pulsed` only"),
    ("{kind: pulsed, rules: [nope]}", "schedule.rules: error: unknown rule 'nope'"),
    ("{kind: pulsed, node_limit: 10}", "expected a node limit of at least the input program's"),
])
def test_bad_pulsed_schedule_is_a_clean_error(tmp_path, run_cli, schedule, message):
    (tmp_path / "c.yaml").write_text("ruleset: qgym\nprogram: {builder: conv_layer, R: 3, S: 3, C: 2, K: 2, Q: 2}\n"
                                     f"schedule: {schedule}\n")
    code, _, err = run_cli("run", tmp_path / "c.yaml", "--output", tmp_path / "out", "--quiet")
    assert code == 2 and message in err and "Traceback" not in err, err


def _run_layer(tmp_path, run_cli) -> tuple[str, dict]:
    """`eqdsl run c.yaml` in `tmp_path`, which must succeed: its stdout and its report."""
    code, out, err = run_cli("run", tmp_path / "c.yaml", "--output", tmp_path / "out")
    assert code == 0, err
    return out, json.loads((tmp_path / "out" / "report.json").read_text())


def test_pulsed_run_reports_epochs_and_a_partial_result_at_the_node_limit(tmp_path, run_cli):
    (tmp_path / "c.yaml").write_text(
        "ruleset: qgym\nprogram: {builder: conv_layer, R: 1, S: 2, C: 3, K: 3, Q: 2, tpr: 1}\n"
        "schedule: {kind: pulsed, epochs: 2, explore_iter: 4, node_limit: 400, epoch_extract: greedy-dag}\n"
        "extract: {method: greedy-dag, compare: []}\nvalidate: true\n")
    out, report = _run_layer(tmp_path, run_cli)
    assert report["schedule"]["stop_reason"] == "node limit"
    assert len(report["schedule"]["epochs"]) == 2 and "pulsed epochs" in out
    assert report["best_cost"] <= report["original_cost"] and report["validation"]["ok"]
    spec = LayerSpec(1, 2, 3, 3, 2, 1)
    assert report["baselines"]["plain"] == spec.plain_cost and set(report["baselines"]) == {
        "plain", "factorisation", "summerge", "summerge-shifted"} and "same layer, other methods" in out
    flops = report["baseline_units"]["FLOPs"]
    assert flops["plain"] == plain_count(spec).ops and set(flops) == {"plain", "factorisation", "summerge", "summerge-shifted", "this run"}
    assert flops["this run"] <= report["best_cost"] <= 2 * flops["this run"]  # FLOPs = adds + muls; cost adds + 2·muls
    assert "in FLOPs: plain" in out


def test_extraction_can_minimise_flops_instead_of_the_weighted_cost():
    from eqdsl.apps.qgym.study import with_cost

    lang = load_language("qgym")
    flops = with_cost(lang, "flops")
    assert flops.costs["mul"].constant == 1 and lang.costs["mul"].constant == 2
    assert flops.costs["add"].constant == 1 and with_cost(lang, "weighted") is lang
    with pytest.raises(ValueError, match="expected weighted or flops"):
        with_cost(lang, "watts")


def test_a_conv_layer_run_executes_its_program_as_a_kernel_and_under_bfv(tmp_path, run_cli):
    pytest.importorskip("tenseal")
    (tmp_path / "c.yaml").write_text(
        "ruleset: qgym\nprogram: {builder: conv_layer, R: 1, S: 1, C: 4, K: 4, Q: 2}\n"
        "schedule: {kind: pulsed, epochs: 1, explore_iter: 1, epoch_extract: greedy-dag}\n"
        "extract: {method: greedy-dag, compare: []}\nexecute: {device: cpu, runs: 3}\nhe: {batch: 4}\n")
    out, report = _run_layer(tmp_path, run_cli)
    assert report["execution"]["exact"] and report["execution"]["kernel_ms"] > 0 and report["execution"]["ort_conv_ms"] > 0
    assert report["he"]["ok"] and report["he"]["batch"] == 4
    assert report["he"]["optimized"]["pt_ct_mul"] <= report["he"]["summerge"]["pt_ct_mul"]
    assert "executed as Q-gym's cpu kernel" in out and "decrypted outputs equal the integer layer" in out


@pytest.mark.parametrize("program, extra, message", [
    ("{builder: conv_layer, R: 1, S: 2, C: 2, K: 2, Q: 2, tpr: 1}", "he: true", "he: runs one output position (tpr 0)"),
    ('{text: "program p:\\n  root add(x(0, 0, 0), x(0, 0, 1))"}', "he: true",
     "he: runs programs whose source builds an HE circuit"),
    ("{builder: conv_layer, R: 1, S: 1, C: 2, K: 2, Q: 2}", "he: 3", "he: error: expected true/false or a mapping"),
])
def test_a_stage_the_program_cannot_run_is_refused_before_optimizing(tmp_path, run_cli, program, extra, message):
    (tmp_path / "c.yaml").write_text(f"ruleset: qgym\nprogram: {program}\n{extra}\n")
    code, out, err = run_cli("run", tmp_path / "c.yaml", "--output", tmp_path / "out")
    assert code == 2 and message in err and "Traceback" not in err and "e-nodes" not in out, err
