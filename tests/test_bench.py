"""python -m quadnn_paper.bench: rows, ratios and their spreads, the limit, the equality check, the CUDA
path (against a strict fake of the torch.cuda calls it makes), and the JSON output (tiny sizes)."""

import json
import math
import os
import subprocess
import sys
import time

import pytest
import torch
from bench_rows import bench_row

from quadnn_paper import bench


@pytest.mark.slow  # a subprocess or two: seconds each
def test_bench_json_rows_and_equality_check():
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "quadnn_paper.bench",
            "--models",
            "cifar_qresnet20",
            "--implementations",
            "default",
            "naive",
            "--batch-size",
            "8",
            "--input",
            "3x16x16",
            "--steps",
            "3",
            "--warmup",
            "1",
            "--threads",
            "1",
            "--json",
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    )
    rows = [json.loads(line) for line in out.stdout.splitlines()]
    assert [(r["model"], r["implementation"]) for r in rows] == [
        ("cifar_resnet20", "conventional"),
        ("cifar_qresnet20", "default"),
        ("cifar_qresnet20", "naive"),
    ]
    base, quad, naive = rows
    assert base["time_ratio"] == 1.0 and base["mem_ratio"] == 1.0 and "limit_ratio" not in base
    for r in (quad, naive):
        assert r["equal"] is True and r["max_rel_err"] <= bench.EQUAL_RTOL
        for k in ("step_ms", "time_ratio", "limit_ratio", "vs_limit"):  # median inside its quartiles
            assert r[k + "_q1"] <= r[k] <= r[k + "_q3"]
        assert r["mem_ratio"] == pytest.approx(r["extra_mb"] / base["extra_mb"])
        # the block convolutions triple (stem and classifier stay conventional)
        assert 2.5 < r["flops_ratio"] < 3.0 and r["params"] == quad["params"]
        # the limit adds measured convolution and elementwise time to the baseline's step
        assert r["limit_ratio"] > 1 and r["limit_conv_ms"] > 0 and r["limit_elem_ms"] > 0
    assert quad["limit_ratio"] == naive["limit_ratio"]  # one limit per model, whatever the implementation
    assert naive["max_rel_err"] == 0.0  # the reference against itself
    assert all(r["extra_mb"] > 0 and r["step_ms"] > 0 and "threads" in r["machine"] for r in rows)


def test_ratios_are_per_round_so_a_load_change_cancels(monkeypatch):
    # the baseline takes 1 s and the quadratic row 2 s, but every third round the machine is three
    # times slower for both: the raw times spread, the per-round ratio does not
    calls = []

    def loaded(self, fn):
        n = len(calls)
        calls.append(fn)
        load = 3.0 if (n // 2) % 3 == 0 else 1.0
        return load * (1.0 if n % 2 == 0 else 2.0)

    monkeypatch.setattr(bench.Clock, "time", loaded)
    base, quad = bench.run(
        ["cifar_qresnet20"],
        batch_size=2,
        input_shape=(3, 8, 8),
        steps=6,
        warmup=0,
        implementations=("default",),
        memory=False,
        threads=1,
        limit=False,
    )
    assert len(calls) >= 12 and calls[0] is not calls[1]  # rounds alternate between the two rows
    assert quad["time_ratio"] == quad["time_ratio_q1"] == quad["time_ratio_q3"] == 2.0
    assert quad["step_ms_q3"] > quad["step_ms_q1"]  # the raw times do spread


def test_compare_resolves_only_separate_intervals():
    a = dict(time_ratio=2.0, time_ratio_q1=1.95, time_ratio_q3=2.05)
    b = dict(time_ratio=2.2, time_ratio_q1=2.1, time_ratio_q3=2.3)
    c = dict(time_ratio=2.1, time_ratio_q1=2.04, time_ratio_q3=2.2)
    assert bench.compare(a, b) == "lower" and bench.compare(b, a) == "higher"
    assert bench.compare(a, c) == "unresolved" and bench.compare(c, b) == "unresolved"


def test_the_limit_counts_each_layers_unavoidable_convolutions_and_traffic():
    torch.manual_seed(0)
    x = torch.randn(4, 3, 16, 16)
    base = bench.create("cifar_resnet20")
    full = bench.limit._Limit(bench.create("cifar_qresnet20"), base, x, batch_size=4)
    # 18 block convolutions, each adding one Cin->2C convolution and nothing subtracted
    assert sum(full.convs.values()) == 18 and all(n > 0 for n in full.convs.values())
    assert {s[2] for s in full.convs} == {32, 64, 128}  # 2 x (16, 32, 64) output channels
    compact = bench.limit._Limit(bench.create("cifar_qresnet20_compact"), base, x, batch_size=4)
    assert sum(n for s, n in compact.convs.items() if n > 0) == 18  # 2Cin->C, replacing Cin->C
    assert sum(n for s, n in compact.convs.items() if n < 0) == -18
    # elementwise bytes: the formula per layer, summed, plus SGD over the extra parameters
    from quadnn import QuadraticLayer

    records = bench.limit._layer_records(bench.create("cifar_qresnet20"), x)
    assert len(records) == 18 and all(isinstance(r["layer"], QuadraticLayer) for r in records)
    elems = sum(4 * (6 * math.prod(r["in_shape"]) + 9 * math.prod(r["out_shape"])) for r in records)
    extra = sum(p.numel() for p in bench.create("cifar_qresnet20").parameters()) - sum(
        p.numel() for p in base.parameters()
    )
    assert full.bytes == 4 * (elems + bench.SGD_ELEMENTS_PER_PARAMETER * extra)
    conv_s = {s: 0.5 for s in full.convs}
    assert full.extra(conv_s, bandwidth=full.bytes) == (pytest.approx(9.0), pytest.approx(1.0))


def test_the_limit_of_a_single_layer_is_its_measured_wider_convolution():
    from quadnn import QuadraticConv2d

    layer = QuadraticConv2d(8, 16, 3, padding=1)
    lim = bench.limit._Limit(
        torch.nn.Sequential(layer),
        torch.nn.Sequential(torch.nn.Conv2d(8, 16, 3, padding=1)),
        torch.randn(2, 8, 10, 10, requires_grad=True),
        batch_size=2,
    )
    ((spec, n),) = lim.convs.items()
    assert n == 1 and spec[1] == (8, 10, 10) and spec[2] == 32 and spec[-1] is True  # Cin->2C, input gradient
    bench.limit._conv_call(spec, 2, "cpu")()  # forward and backward run at that spec


def test_conv_share_counts_convolutions_only():
    x, w = torch.randn(8, 16, 32, 32), torch.randn(16, 16, 3, 3)
    a, b = torch.randn(256, 256), torch.randn(256, 256)
    assert bench.conv_share(lambda: torch.nn.functional.conv2d(x, w, padding=1)) > 0.5
    assert bench.conv_share(lambda: a @ b) == 0.0


def test_a_cpu_profile_prints_nothing_of_kineto_on_the_console():
    """kineto's GPU probe says "ERROR ... gpuGetDeviceCount failed" on a machine without a GPU."""
    code = "import torch; from quadnn_paper import bench; print(bench.conv_share(lambda: torch.ones(8) + 1) >= 0)"
    env = {k: v for k, v in os.environ.items() if k != "KINETO_LOG_LEVEL"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0 and done.stdout == "True\n", done.stderr
    assert "ERROR" not in done.stderr and "profiler_start" not in done.stderr, done.stderr


def test_compare_implementations_detects_a_difference(monkeypatch):
    torch.manual_seed(0)
    model = bench.create("cifar_qresnet20")
    x, y = bench.batch(2, (3, 8, 8))
    assert bench.compare_implementations(model, x, y, "fast") < bench.EQUAL_RTOL
    assert bench.compare_implementations(model, x, y, "budget=1.5") < bench.EQUAL_RTOL
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


def test_bad_arguments(capsys):
    with pytest.raises(ValueError, match="3x32x32"):
        bench.parse_input("32x32")
    with pytest.raises(ValueError, match="naive"):
        bench.set_implementation(torch.nn.Linear(2, 2), "turbo")
    with pytest.raises(ValueError, match=r"'budget=B' with B in \[0, 2\], got 'budget=3'"):
        bench.check_implementation("budget=3")
    if not torch.cuda.is_available():
        with pytest.raises(SystemExit):
            bench.main(["--device", "cuda", "--steps", "1"])
        assert "CUDA is not available here (valid: cpu)" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        bench.main(["--device", "mps", "--steps", "1"])
    assert "--device must be cpu or cuda[:index], got 'mps'" in capsys.readouterr().err


def test_protocols_cover_every_profile_and_full_is_the_papers_setting():
    from quadnn_paper.common.profiles import PROFILES, select
    from quadnn_paper.sections import efficiency

    assert set(efficiency.PROTOCOLS) == set(PROFILES)
    full = select(efficiency.PROTOCOLS, "full")
    assert full["batch_size"] == 128 and tuple(full["input"]) == (3, 32, 32)  # the paper's CIFAR setting
    assert {"cifar_qresnet20", "cifar_qresnet56"} <= set(full["models"])
    assert all("naive" in impls for impls in full["implementations"].values())
    assert efficiency.PAPER_EPOCH_SECONDS["cifar_resnet20"] == 10.43
    assert efficiency.PAPER_EPOCH_SECONDS["cifar_qresnet20"] == 10.87
    for p in PROFILES:  # every model has a conventional baseline and a list of implementations
        P = efficiency.PROTOCOLS[p]
        assert set(P["implementations"]) == set(P["models"])
        for m in P["models"]:
            assert bench.baseline_name(m).startswith("cifar_resnet")


def test_compile_rows_against_the_compiled_baseline(monkeypatch):
    # the row plumbing with torch.compile replaced by the identity (compiling is what test_compile does)
    monkeypatch.setattr(torch, "compile", lambda model, **kw: model)
    rows = bench.run(
        ["cifar_qresnet20"],
        batch_size=4,
        input_shape=(3, 8, 8),
        steps=2,
        warmup=1,
        implementations=("default", "naive"),
        memory=False,
        threads=1,
        compile=True,
    )
    assert [(r["model"], r["implementation"], r["compiled"]) for r in rows] == [
        ("cifar_resnet20", "conventional", False),
        ("cifar_qresnet20", "default", False),
        ("cifar_qresnet20", "naive", False),
        ("cifar_resnet20", "conventional", True),
        ("cifar_qresnet20", "default", True),
    ]
    eager_base, eager_quad, _, base, quad = rows
    assert base["time_ratio"] == 1.0 and quad["limit_ratio"] > 1 and quad["vs_limit"] > 0
    conv_ms = quad["step_ms"] * quad["conv_share"]  # the step split into convolutions and the rest
    assert quad["conv_ratio"] == pytest.approx(quad["time_ratio"] * quad["conv_share"] / base["conv_share"])
    assert quad["other_ratio"] == pytest.approx(
        quad["time_ratio"] * (1 - quad["conv_share"]) / (1 - base["conv_share"])
    )
    assert conv_ms > 0
    assert quad["eager_ratio"] == pytest.approx(quad["step_ms"] / eager_quad["step_ms"])
    assert base["eager_ratio"] == pytest.approx(base["step_ms"] / eager_base["step_ms"])
    assert quad["equal"] and quad["compile_s"] > 0 and "extra_mb" not in quad
    assert "vs_limit" in bench.format_table(rows) and "eager_ratio" in bench.format_table(rows)


# -- CUDA without a GPU: a strict fake of the torch.cuda calls bench makes ----------------------------
class FakeCuda:
    """torch.cuda's timing and memory calls as bench uses them, with the checks the real ones make:
    a device argument must be a CUDA device (or an index, or None); an event's elapsed_time needs
    both events created with enable_timing, recorded, and completed (a synchronize after the
    record); the peak is only meaningful after a reset. Times are the host's clock."""

    def __init__(self):
        self.log, self.pending, self.allocated, self.peak = [], [], 100 * 2**20, None
        fake = self

        class Event:
            def __init__(self, enable_timing=False, blocking=False, interprocess=False):
                self.timing, self.t, self.done = enable_timing, None, False

            def record(self, stream=None):
                self.t, self.done = time.perf_counter(), False
                fake.pending.append(self)

            def synchronize(self):  # waits for this event and, one stream, everything recorded before it
                if self.t is None:
                    raise RuntimeError("event not recorded")
                i = fake.pending.index(self)
                for e in fake.pending[: i + 1]:
                    e.done = True
                del fake.pending[: i + 1]

            def elapsed_time(self, end):
                if not (self.timing and end.timing):
                    raise RuntimeError("Both events must be created with argument 'enable_timing=True'.")
                if self.t is None or end.t is None:
                    raise RuntimeError("Both events must be recorded before calculating elapsed time.")
                if not (self.done and end.done):
                    raise RuntimeError("Both events must be completed before calculating elapsed time.")
                fake.log.append("elapsed")
                return 1000 * (end.t - self.t)

        self.Event = Event

    @staticmethod
    def check_device(device):
        if device is None or isinstance(device, int):
            return
        device = torch.device(device)
        if device.type != "cuda":
            raise ValueError(f"Expected a cuda device, but got: {device}")

    def synchronize(self, device=None):
        self.check_device(device)
        for e in self.pending:
            e.done = True
        self.pending = []
        self.log.append("sync")

    def reset_peak_memory_stats(self, device=None):
        self.check_device(device)
        self.peak = self.allocated
        self.log.append("reset")

    def memory_allocated(self, device=None):
        self.check_device(device)
        self.log.append("allocated")
        return self.allocated

    def max_memory_allocated(self, device=None):
        self.check_device(device)
        if self.peak is None:
            raise AssertionError("peak read without a reset: it would include earlier steps")
        self.log.append("max")
        return self.peak

    def install(self, monkeypatch):
        for name in ("Event", "synchronize", "reset_peak_memory_stats", "memory_allocated", "max_memory_allocated"):
            monkeypatch.setattr(torch.cuda, name, getattr(self, name))
        monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
        monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "Fake GPU")
        monkeypatch.setattr(bench.timing, "to_device", lambda obj, device: obj)  # tensors stay on the CPU


def test_cuda_clock_synchronises_before_reading_events(monkeypatch):
    fake = FakeCuda()
    fake.install(monkeypatch)
    clock = bench.Clock("cuda")
    clock.start()
    assert clock.time(lambda: time.sleep(0.01)) >= 0.01
    assert fake.log == ["sync", "elapsed"]
    # the fake is strict: reading an event that has not completed fails, as on a GPU
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    b.record()
    with pytest.raises(RuntimeError, match="completed"):
        a.elapsed_time(b)
    a.synchronize()
    with pytest.raises(RuntimeError, match="completed"):  # the end event is still in flight
        a.elapsed_time(b)
    with pytest.raises(ValueError, match="cuda device"):
        torch.cuda.synchronize(torch.device("cpu"))


def test_cuda_step_memory_reads_the_peak_of_that_step_alone(monkeypatch):
    fake = FakeCuda()
    fake.install(monkeypatch)

    def step():  # allocates 30 MiB at its peak and frees them
        assert fake.log[-2:] == ["reset", "allocated"]  # reset and baseline read before the step
        fake.peak = fake.allocated + 30 * 2**20

    assert bench.cuda_step_memory(step, torch.device("cuda")) == 30
    assert fake.log == ["sync", "reset", "allocated", "sync", "max"]  # synchronised before the peak is read


@pytest.mark.slow  # a subprocess or two: seconds each
def test_cuda_rows_are_the_cpu_rows(monkeypatch):
    kw = dict(batch_size=2, input_shape=(3, 8, 8), steps=2, warmup=1, implementations=("default", "naive"), threads=1)
    cpu = bench.run(["cifar_qresnet20"], memory=False, **kw)
    fake = FakeCuda()
    fake.install(monkeypatch)
    # torch's profiler cannot be faked: with CUDA activity on a machine without a driver it logs a
    # stack trace per operator (about a minute). The CUDA rows need only the call with the device.
    shares = []
    monkeypatch.setattr(bench.harness, "conv_share", lambda step, device="cpu": shares.append(str(device)) or 0.5)
    monkeypatch.setattr(bench.harness, "cuda_launches", lambda step: 100)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "set_device", lambda device: fake.log.append(f"set {device}"))
    cuda = bench.run(["cifar_qresnet20"], device="cuda", **kw)
    assert shares and set(shares) == {"cuda:0"} and fake.log[0] == "set cuda:0"
    assert [(r["model"], r["implementation"]) for r in cuda] == [(r["model"], r["implementation"]) for r in cpu]
    for c, g in zip(cpu, cuda):
        # memory in-process on CUDA, from the allocator; kernel launches from the profiler
        assert set(g) == set(c) | {"extra_mb", "mem_ratio", "cuda_launches", "cuda_launch_ratio"}
        assert g["device"] == "cuda:0" and g["machine"].startswith("Fake GPU")
        assert g["launches"] == c["launches"]  # the same ATen operations on either device
    assert fake.log.count("elapsed") >= 3 * 3  # every row in every round timed by events
    assert fake.log.count("max") == 3  # one memory measurement per row


@pytest.mark.skipif(
    not torch.cuda.is_available(),
    reason="needs a CUDA device (this machine has none; the CUDA "
    "path is checked above against a strict fake of torch.cuda)",
)
def test_cuda_bench_on_a_gpu():
    rows = bench.run(
        ["cifar_qresnet20"],
        batch_size=8,
        input_shape=(3, 16, 16),
        steps=2,
        warmup=1,
        implementations=("default", "naive"),
        device="cuda",
    )
    assert all(r["step_ms"] > 0 and r["extra_mb"] > 0 for r in rows)
    assert all(r["equal"] for r in rows if r["implementation"] != "conventional")


def test_efficiency_dominates_needs_less_memory_and_a_resolved_faster_step():
    from quadnn_paper.analysis.timing import dominates

    def row(mem, q1, q2, q3):
        return dict(mem_ratio=mem, time_ratio=q2, time_ratio_q1=q1, time_ratio_q3=q3)

    naive = row(2.4, 2.7, 2.8, 2.9)
    assert dominates(row(1.9, 2.5, 2.6, 2.65), naive) == "yes"
    assert dominates(row(1.9, 2.6, 2.75, 2.8), naive) == "not shown (less memory, time unresolved)"
    assert dominates(row(2.5, 2.5, 2.6, 2.65), naive) == "no"  # faster, more memory
    assert dominates(row(1.9, 3.0, 3.1, 3.2), naive) == "no"  # less memory, slower
    assert dominates(None, naive) == "--"


def test_bench_on_cuda_n_makes_it_the_current_device(monkeypatch):
    """Events are recorded on the current device; --device cuda:1 must make GPU 1
    current before anything is timed, or GPU 0's stream is timed while GPU 1 computes."""
    from standin_device import StrictCuda

    fake = StrictCuda(2).install(monkeypatch)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: fake.current or 0)

    class Stop(Exception):
        pass

    def stop(*a, **kw):
        raise Stop

    monkeypatch.setattr(bench.harness, "batch", stop)  # the first thing after the device is chosen
    for given, want in (("cuda:1", 1), ("cuda", 1), (torch.device("cuda", 0), 0)):
        with pytest.raises(Stop):
            bench.run(["cifar_qresnet20"], device=given)
        assert fake.current == want  # "cuda" alone: the current one, kept


def _count_step(name, impl=None):
    torch.manual_seed(0)
    model = bench.set_implementation(bench.create(name).train(), impl or "default")
    x, y = bench.batch(8, (3, 32, 32))
    step = bench.make_step(model, x, y)
    step()  # the optimiser's state exists, as in a timed step
    return step


def test_launch_count_of_a_training_step():
    """By the method: a step of one convolution counted by hand; then ResNet20 and QResNet20 near
    counts taken independently at batch 8 (177 for ResNet20, with another tally of the loss and SGD)."""
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, bias=False), torch.nn.Flatten())
    x, y = torch.randn(2, 3, 4, 4), torch.randint(0, 16, (2,))
    step = bench.make_step(net, x, y)
    step()
    # forward: convolution, log_softmax, nll_loss; backward: ones_like (the seed), nll_loss_backward,
    # log_softmax_backward, convolution_backward; SGD (foreach): weight decay, momentum mul and add,
    # the update: _foreach_add (decay), _foreach_mul_, _foreach_add_, _foreach_add_
    assert bench.aten_launches(step) == 3 + 4 + 4
    counts = {
        (n, i): bench.aten_launches(_count_step(n, i))
        for n, i in [("cifar_resnet20", None), ("cifar_qresnet20", "default"), ("cifar_qresnet20", "naive")]
    }
    base, default, naive = counts.values()
    assert abs(base - 177) <= 5 and naive > default
    # 318 (1.83x) with the gate's weight a view of one fused tensor and backward's two products one
    # launch each, 357 (2.03x) without: a rise above 1.9x means a fusion was lost
    assert default / base < 1.9
    assert bench.aten_launches(_count_step("cifar_resnet20")) == base  # a count, not a sample


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("neuron", ["full", "parabolic", "poly", "compact"])
def test_every_neuron_steps_at_its_launch_floor(neuron, bias):
    """The default runs no launch beyond the floor derived operation by operation in
    bench.extra_launches_floor (one layer, with and without bias, its input needing a gradient as
    inside a network; then a whole QResNet20): an added pass fails here."""
    from quadnn import QuadraticConv2d

    conv = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, bias=bias), torch.nn.Flatten())
    quad = torch.nn.Sequential(QuadraticConv2d(3, 4, 3, bias=bias, neuron=neuron), torch.nn.Flatten())
    x, y = torch.randn(2, 3, 4, 4, requires_grad=True), torch.randint(0, 16, (2,))
    counts = []
    for net in (conv, quad):
        step = bench.make_step(net, x, y)
        step()
        counts.append(bench.aten_launches(step))
    # compact: above its floor by the [W, W_b] concatenation along the input dimension and the two
    # copies of its gradient's halves into W's and W_b's (two Parameters, not halves of one tensor);
    # with bias, by b_r + c, one constant, and the copy of its gradient into the second of the two
    above = (3 + 2 * bias) if neuron == "compact" else 0
    assert counts[1] == bench.launch_floor(quad, counts[0]) + above
    if neuron == "full" and bias:
        base = bench.aten_launches(_count_step("cifar_resnet20"))
        model = bench.create("cifar_qresnet20")
        assert bench.aten_launches(_count_step("cifar_qresnet20", "default")) == bench.launch_floor(model, base)


def test_bench_rows_carry_the_launch_count(monkeypatch):
    monkeypatch.setattr(torch, "compile", lambda model, **kw: model)
    rows = bench.run(
        ["cifar_qresnet20"],
        batch_size=2,
        input_shape=(3, 8, 8),
        steps=1,
        warmup=1,
        implementations=("default", "naive"),
        memory=False,
        threads=1,
        compile=True,
        limit=False,
    )
    eager = [r for r in rows if not r["compiled"]]
    assert all(isinstance(r["launches"], int) and r["launches"] > 0 for r in eager)
    base = eager[0]
    assert all(r["launch_ratio"] == r["launches"] / base["launches"] for r in eager)
    assert not any("launches" in r for r in rows if r["compiled"])  # counted on CUDA only (cuda_launches)
    assert "launches" in bench.format_table(rows)


def test_compiled_rows_compare_with_tf32_off(monkeypatch):
    """The compiled row's first step and the eager one are compared with TF32 off (cuDNN's is on by
    default on CUDA); torch's flags are back afterwards, for the timed steps."""
    monkeypatch.setattr(torch, "compile", lambda model, **kw: model)
    monkeypatch.setattr(torch.backends.cudnn, "allow_tf32", True)
    seen = []
    forward = torch.nn.Conv2d.forward
    monkeypatch.setattr(
        torch.nn.Conv2d, "forward", lambda self, x: seen.append(torch.backends.cudnn.allow_tf32) or forward(self, x)
    )
    x, y = bench.batch(2, (3, 8, 8))
    bench.harness._compiled_row("cifar_resnet20", (3, 8, 8), x, y, 0, False, "cpu")
    assert seen and not any(seen) and torch.backends.cudnn.allow_tf32


def test_efficiency_tables_keep_the_papers_seconds_and_gpu_rows_apart(tmp_path):
    """The paper's 10.43/10.87/21.61/27.72 s are in the models table at every profile (a table too wide
    for the page loses columns); GPU rows are their own table."""
    from quadnn_paper.data import gpu_bench
    from quadnn_paper.sections import efficiency as E

    rows = [
        bench_row("cifar_resnet20", "conventional"),
        bench_row("cifar_qresnet20", "default", launches=354, launch_ratio=2.03),
    ]
    out = E.summary(dict(rows=rows, compile_rows=[]))
    assert len(out.table[0]) == 9 and out.table[1][-1] == "354 (2.03)"
    paper = {(r[0], r[1]): r[5].value for r in out.models if r[5] is not None}
    assert paper[("ResNet20", "conventional")] == 10.43 and paper[("ResNet20", "full")] == 10.87
    assert paper[("ResNet56", "conventional")] == 21.61 and paper[("ResNet56", "full")] == 27.72
    assert [r[2] for r in out.models if r[0] == "ResNet56"] == ["--"] * 4  # not measured at smoke
    assert out.gpu == [["not measured"] + ["--"] * (len(E.GPU_HEADER) - 1)]
    folder = tmp_path / "2026-11-25-h100-gpu-check"
    folder.mkdir()
    gpu_rows = [
        bench_row("cifar_resnet20", "conventional", device="cuda:0"),
        bench_row("cifar_qresnet20", "naive", device="cuda:0"),
    ]
    (folder / "bench.json").write_text("".join(json.dumps(r) + "\n" for r in gpu_rows))
    bench_ = gpu_bench.load(tmp_path)
    assert bench_.date == "2026-11-25" and bench_.machine == "M" and len(bench_.rows) == 2
    table = E.summary(dict(rows=rows, compile_rows=[], gpu=bench_)).gpu
    assert [r[2] for r in table] == ["conventional", "naive"] and len(table[0]) == len(E.GPU_HEADER)
    # a CPU row in a GPU folder is refused, naming the file and line
    (folder / "bench2.json").write_text(json.dumps(bench_row("cifar_resnet20", "conventional")) + "\n")
    with pytest.raises(ValueError, match=r"bench2.json:1: measured on 'cpu', not a GPU"):
        gpu_bench.load(tmp_path)


def test_the_committed_gpu_rows_load():
    from quadnn_paper.data import gpu_bench

    b = gpu_bench.load()
    assert b is not None and b.machine.startswith("NVIDIA ") and b.folder.startswith("docs/gpu/")
    assert {r["model"] for r in b.rows} >= {"cifar_resnet20", "cifar_qresnet20"}
