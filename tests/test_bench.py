"""python -m quadnn.bench: rows, ratios, the equality check, and the JSON output (tiny sizes)."""
import json
import subprocess
import sys

import pytest
import torch

from quadnn import bench


def test_bench_json_rows_and_equality_check():
    out = subprocess.run(
        [sys.executable, "-m", "quadnn.bench", "--models", "cifar_qresnet20", "--implementations", "default", "naive",
         "--batch-size", "8", "--input", "3x16x16", "--steps", "2", "--warmup", "1", "--threads", "1", "--json"],
        capture_output=True, text=True, check=True, timeout=300)
    rows = [json.loads(line) for line in out.stdout.splitlines()]
    assert [(r["model"], r["implementation"]) for r in rows] == [
        ("cifar_resnet20", "conventional"), ("cifar_qresnet20", "default"), ("cifar_qresnet20", "naive")]
    base, quad, naive = rows
    assert base["time_ratio"] == 1.0 and base["mem_ratio"] == 1.0
    for r in (quad, naive):
        assert r["equal"] is True and r["max_rel_err"] <= bench.EQUAL_RTOL
        assert r["time_ratio"] == pytest.approx(r["step_ms"] / base["step_ms"])
        assert r["mem_ratio"] == pytest.approx(r["extra_mb"] / base["extra_mb"])
        # the block convolutions triple (stem and classifier stay conventional)
        assert 2.5 < r["flops_ratio"] < 3.0 and r["params"] == quad["params"]
        # the time the arithmetic implies: between 1 and the FLOP ratio, by the baseline's conv share
        assert 0 < base["conv_share"] < 1
        assert r["arith_ratio"] == pytest.approx(1 + (r["flops_ratio"] - 1) * base["conv_share"])
    assert naive["max_rel_err"] == 0.0  # the reference against itself
    assert all(r["extra_mb"] > 0 and r["step_ms"] > 0 and "threads" in r["machine"] for r in rows)


def test_conv_share_counts_convolutions_only():
    x, w = torch.randn(8, 16, 32, 32), torch.randn(16, 16, 3, 3)
    a, b = torch.randn(256, 256), torch.randn(256, 256)
    assert bench.conv_share(lambda: torch.nn.functional.conv2d(x, w, padding=1)) > 0.5
    assert bench.conv_share(lambda: a @ b) == 0.0


def test_compare_implementations_detects_a_difference(monkeypatch):
    torch.manual_seed(0)
    model = bench.create("cifar_qresnet20")
    x, y = bench.batch(2, (3, 8, 8))
    assert bench.compare_implementations(model, x, y, "fast") < bench.EQUAL_RTOL
    # a wrong fast path (the gate ignored) must be caught
    from quadnn.layers import QuadraticLayer
    monkeypatch.setattr(QuadraticLayer, "_forward_fast", lambda self, x: self._linear_op(x, self.weight, self.bias))
    assert bench.compare_implementations(model, x, y, "fast") > 1e-2


def test_forward_flops_of_a_single_layer():
    from quadnn import QuadraticConv2d
    layer = QuadraticConv2d(4, 8, 3, padding=1, bias=False)
    x = torch.randn(1, 4, 10, 10)
    conv = 2 * 8 * 4 * 9 * 100  # multiply-adds x 2 of one 3x3 convolution
    assert bench.forward_gflops(layer, x) * 1e9 == pytest.approx(3 * conv)


def test_cli_names_a_bad_model_and_exits_2(capsys):
    with pytest.raises(SystemExit) as exit_info:
        bench.main(["--models", "cifar_resnet20", "--no-memory", "--steps", "1"])
    assert exit_info.value.code == 2
    assert "'cifar_resnet20' has no quadratic layers" in capsys.readouterr().err


def test_bad_arguments():
    with pytest.raises(ValueError, match="3x32x32"):
        bench.parse_input("32x32")
    with pytest.raises(ValueError, match="naive"):
        bench.set_implementation(torch.nn.Linear(2, 2), "turbo")


def test_protocols_cover_every_profile_and_full_is_the_papers_setting():
    from quadnn_paper.sections import efficiency
    from quadnn_paper.common.profiles import PROFILES, select
    assert set(efficiency.PROTOCOLS) == set(PROFILES)
    full = select(efficiency.PROTOCOLS, "full")
    assert full["batch_size"] == 128 and tuple(full["input"]) == (3, 32, 32)  # the paper's CIFAR setting
    assert {"cifar_qresnet20", "cifar_qresnet56"} <= set(full["models"]) and "naive" in full["implementations"]
    assert efficiency.PAPER_EPOCH_SECONDS["cifar_resnet20"] == 10.43
    assert efficiency.PAPER_EPOCH_SECONDS["cifar_qresnet20"] == 10.87
    for p in PROFILES:  # every model has a conventional baseline
        for m in efficiency.PROTOCOLS[p]["models"]:
            assert bench.baseline_name(m).startswith("cifar_resnet")


def test_compile_rows_against_the_compiled_baseline(monkeypatch):
    # the row plumbing with torch.compile replaced by the identity (compiling is what test_compile does)
    monkeypatch.setattr(torch, "compile", lambda model, **kw: model)
    rows = bench.run(["cifar_qresnet20"], batch_size=4, input_shape=(3, 8, 8), steps=2, warmup=1,
                     implementations=("default", "naive"), memory=False, threads=1, compile=True)
    assert [(r["model"], r["implementation"], r["compiled"]) for r in rows] == [
        ("cifar_resnet20", "conventional", False), ("cifar_qresnet20", "default", False),
        ("cifar_qresnet20", "naive", False), ("cifar_resnet20", "conventional", True),
        ("cifar_qresnet20", "default", True)]
    eager_base, eager_quad, _, base, quad = rows
    assert base["time_ratio"] == 1.0 and quad["time_ratio"] == pytest.approx(quad["step_ms"] / base["step_ms"])
    assert quad["arith_ratio"] == pytest.approx(1 + (quad["flops_ratio"] - 1) * base["conv_share"])
    assert quad["vs_arith"] == pytest.approx(quad["time_ratio"] / quad["arith_ratio"])
    conv_ms = quad["step_ms"] * quad["conv_share"]  # the step split into convolutions and the rest
    assert quad["conv_ratio"] == pytest.approx(conv_ms / (base["step_ms"] * base["conv_share"]))
    assert quad["other_ratio"] == pytest.approx((quad["step_ms"] - conv_ms) / (base["step_ms"] * (1 - base["conv_share"])))
    assert quad["eager_ratio"] == pytest.approx(quad["step_ms"] / eager_quad["step_ms"])
    assert base["eager_ratio"] == pytest.approx(base["step_ms"] / eager_base["step_ms"])
    assert quad["equal"] and quad["compile_s"] > 0 and "extra_mb" not in quad
    assert "vs_arith" in bench.format_table(rows) and "eager_ratio" in bench.format_table(rows)
