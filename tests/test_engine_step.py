"""The engine's training step against the plain one: launches and host synchronisations per step.

Launches are counted as quadnn_paper.bench counts them (ATen operations that launch a kernel, with torch's
multi-tensor optimiser path as on CUDA); the engine step is a two-step epoch less a one-step epoch
(:mod:`quadnn_paper.engine.step_cost`). Host synchronisations are counted the same way, per step.
"""

import os

import pytest
import torch
from standin_device import DEVICE, StandInDevice
from torch.utils._python_dispatch import TorchDispatchMode

from quadnn import relinear
from quadnn_paper.data import tiny
from quadnn_paper.engine import RunConfig, step_cost

pytestmark = pytest.mark.usefixtures("one_thread")

BATCH = 8


@pytest.fixture(scope="module")
def cifar(tmp_path_factory):
    root = tmp_path_factory.mktemp("data")
    tiny.write_cifar(root, "cifar10", n_train=5 * BATCH, n_test=BATCH)
    return root


def config(cifar, case: str) -> RunConfig:
    kw = dict(step_cost.CASES[case], width=0.25, batch_size=BATCH, epochs=1, data_dir=str(cifar))
    return RunConfig(**kw, threads=1, progress=False, device="cpu")


@pytest.fixture(scope="module")
def counts(cifar, tmp_path_factory):
    """Per case: the plain step's launches, the engine step's, and the batch draw's (counted once)."""
    out = {}
    for case in step_cost.CASES:
        cfg = config(cifar, case)
        root = tmp_path_factory.mktemp(case)
        out[case] = dict(
            plain=step_cost.plain_step_launches(cfg),
            engine=step_cost.engine_step_launches(cfg, root),
            draw=step_cost.batch_draw_launches(cfg),
        )
    return out


# The engine's own work beyond the plain step, the batch draw aside: the correct count (argmax, ==,
# sum: 3), ReLinear's reference decay (3) and l2 shrink (3), less backward's seed (plain: ones_like).
# Per-parameter work (torch's per-group optimiser passes, a Python loop of in-place operations over
# the quadratic terms) costs hundreds, and grows with depth.
OWN_WORK = 3 + 3 + 3 - 1


@pytest.mark.parametrize("case", list(step_cost.CASES))
def test_engine_step_is_the_plain_step_plus_the_batch_draw_and_a_few_launches(counts, case):
    c = counts[case]
    assert c["engine"] <= c["plain"] + c["draw"] + OWN_WORK, c


def test_engine_steps_extra_launches_do_not_grow_with_depth(cifar, tmp_path):
    # QResNet32 has 1.6x QResNet20's quadratic layers: a per-parameter launch would show here
    extra = {}
    for model in ("cifar_qresnet20", "cifar_qresnet32"):
        cfg = config(cifar, "qresnet20-sg").replace(model=model)
        extra[model] = step_cost.engine_step_launches(cfg, tmp_path / model) - step_cost.plain_step_launches(cfg)
    assert extra["cifar_qresnet32"] == extra["cifar_qresnet20"], extra


@pytest.fixture(scope="module")
def device_counts(cifar, tmp_path_factory):
    """Per case, on the stand-in device: the plain step's and the engine step's device launches."""
    count, out = step_cost.device_launches(DEVICE.type), {}
    for case in step_cost.CASES:
        cfg = config(cifar, case)
        with StandInDevice():
            out[case] = dict(
                plain=step_cost.plain_step_launches(cfg, count, DEVICE),
                engine=step_cost.engine_step_count(cfg, tmp_path_factory.mktemp(case), count, DEVICE),
            )
    return out


@pytest.mark.parametrize("case", list(step_cost.CASES))
def test_engine_step_within_plain_step_plus_20_on_a_gpu(device_counts, case):
    """The goal: the engine step launches at most the plain step's + 20 (augmentation and
    metrics) on a GPU, where the batch draw's host-side index building launches nothing."""
    c = device_counts[case]
    assert c["engine"] <= c["plain"] + 20, c


def test_the_device_count_leaves_host_work_out_and_counts_copies():
    count = step_cost.device_launches(DEVICE.type)
    with StandInDevice():
        x = torch.ones(4).to(DEVICE)
        assert count(lambda: torch.arange(4) + 1) == 0  # host tensors only
        assert count(lambda: x * 2 + 1) == 2 and count(lambda: torch.ones(4).to(DEVICE)) == 1
        assert count(lambda: x.view(2, 2)) == 0  # a view launches nothing


def test_the_batch_draw_gives_the_pixels_of_crop_then_flip(cifar):
    """augment against a plain reference: pad the normalised images, crop each at its offsets,
    flip those drawn, with the same draws from the generator."""
    from quadnn_paper.data import cifar as C
    from quadnn_paper.engine.tasks import make_task

    data = make_task(config(cifar, "resnet20")).data
    x = data.x_train[:BATCH]
    got = C.augment(data, x, torch.Generator().manual_seed(3))
    gen = torch.Generator().manual_seed(3)
    p, (h, w) = data.pad, x.shape[-2:]
    oy, ox = (torch.randint(0, 2 * p + 1, (BATCH,), generator=gen) for _ in range(2))
    flip = torch.rand(BATCH, generator=gen) < 0.5
    xp = torch.nn.functional.pad((x.float() / 255.0 - data.mean[:, None, None]) / data.std[:, None, None], (p,) * 4)
    for i in range(BATCH):
        want = xp[i, :, oy[i] : oy[i] + h, ox[i] : ox[i] + w]
        assert torch.equal(got[i], want.flip(-1) if flip[i] else want)


# -- no host synchronisation per step ------------------------------------------------------------
aten = torch.ops.aten
_SYNCS = {aten._local_scalar_dense.default, aten.is_nonzero.default, aten.equal.default}
_SYNCS |= {aten.nonzero.default, aten.masked_select.default}  # their output's size waits for the device
_COPIES = {aten._to_copy.default, aten.copy_.default}


class Syncs(TorchDispatchMode):
    """Counts the operations that make the host wait for the device: reading a value
    (``.item()``, ``bool()``, ``float()``: ``_local_scalar_dense``), data-dependent shapes, copies
    from a compute device to the CPU, and blocking copies to it (without ``non_blocking``, torch
    waits for the copy, and with it for the stream's queued kernels)."""

    def __init__(self):
        super().__init__()
        self.seen = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in _SYNCS or (func in _COPIES and _waits(func, args, kwargs)):
            self.seen.append(str(func))
        return func(*args, **kwargs)


def _waits(func, args, kwargs) -> bool:
    if func is aten.copy_.default:
        source, target, non_blocking = args[1].device, args[0].device, kwargs.get("non_blocking", args[2:3] == (True,))
    else:
        source, target, non_blocking = args[0].device, kwargs.get("device"), kwargs.get("non_blocking", False)
    if target is None or torch.device(target).type == source.type:
        return False
    return torch.device(target).type == "cpu" or not non_blocking


def syncs(fn) -> int:
    with Syncs() as mode:
        fn()
    return len(mode.seen)


@pytest.mark.parametrize("case", ["resnet20", "qresnet20-sw-l2"])
def test_no_engine_step_waits_for_the_device_on_the_cpu(cifar, tmp_path, case):
    assert step_cost.engine_step_count(config(cifar, case), tmp_path, syncs) == 0


def test_the_engines_own_step_never_waits_on_a_standin_gpu(cifar, tmp_path, monkeypatch):
    # the data held and augmented on the device; every copy between it and the host seen
    from quadnn_paper.engine import loop

    inside, step = Syncs(), loop._train_step

    def counted(*args):
        with inside:
            return step(*args)

    monkeypatch.setattr(loop, "_train_step", counted)
    with StandInDevice():
        step_cost.engine_step_count(config(cifar, "qresnet20-sg"), tmp_path, lambda epoch: [epoch(), 0][1], DEVICE)
    assert inside.seen == []


def test_no_engine_step_waits_for_the_device_on_a_standin_gpu(cifar, tmp_path):
    # the batch draw builds its crop and flip indices on the CPU and copies them without waiting
    with StandInDevice():
        assert step_cost.engine_step_count(config(cifar, "qresnet20-sg"), tmp_path, syncs, DEVICE) == 0


def test_sync_counter_sees_reads_and_blocking_copies():
    x = torch.ones(3)
    assert syncs(lambda: x.sum().item()) == 1 and syncs(lambda: bool(x.sum())) == 1
    with StandInDevice():
        y = torch.ones(3).to(DEVICE)
        assert syncs(lambda: y.cpu()) == 1 and syncs(lambda: y + 1) == 0
        assert syncs(lambda: x.to(DEVICE)) == 1 and syncs(lambda: x.to(DEVICE, non_blocking=True)) == 0


# -- compiled runs: static shapes, CUDA graphs on CUDA, compilation paid once and recorded ----------
def test_compiling_drops_the_last_partial_batch_and_is_part_of_the_run_id_only_then():
    plain = RunConfig(train_limit=100, batch_size=32)
    compiled = plain.replace(compile=True)
    assert "drop_last" not in plain.key()  # run ids of uncompiled runs as before
    assert compiled.drop_last and compiled.key()["drop_last"] is True and compiled.run_id != plain.run_id


def test_a_compiled_run_trains_full_batches_and_records_its_compile_seconds(tmp_path, monkeypatch):
    from runs import small_run

    from quadnn_paper.engine import run
    from quadnn_paper.engine.tasks import make_task

    asked = []

    def compile_(net, **kw):  # inductor's code generation is not what is tested here
        asked.append(kw)
        return net

    monkeypatch.setattr(torch, "compile", compile_)
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", "-")  # restored after the test, whatever the run sets
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR")
    cfg = small_run(train_limit=40, batch_size=16, compile=True)
    task = make_task(cfg)
    assert task.steps_per_epoch() == 2 and [len(y) for _, y, _ in task.train_batches(0)] == [16, 16]
    res = run(cfg, tmp_path / "runs")
    assert asked == [dict(mode=None)]  # on the CPU: no CUDA graphs
    assert res["compile_seconds"] > 0 and res["history"][0]["compile_seconds"] == res["compile_seconds"]
    assert "compile_seconds" not in res["history"][1]
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == str((tmp_path / "runs" / "inductor").resolve())


def test_compiled_on_cuda_means_cuda_graphs(monkeypatch, tmp_path):
    from quadnn_paper.engine import RunStore, loop

    monkeypatch.setattr(torch, "compile", lambda net, **kw: kw)
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))
    cuda = torch.device("cuda", 0)
    assert loop._compiled(torch.nn.Linear(1, 1), RunStore(tmp_path), cuda) == dict(mode="reduce-overhead")
    assert loop._compiled(torch.nn.Linear(1, 1), RunStore(tmp_path), cuda, nranks=2) == dict(mode=None)  # DDP


# -- the same arithmetic, bit for bit ------------------------------------------------------------------
def _relinear_model(seed=0):
    import timm

    torch.manual_seed(seed)
    model = timm.create_model("cifar_qresnet20", width=0.25)
    with torch.no_grad():  # terms away from their reference, some exactly on it
        for i, (_, p, _, _) in enumerate(relinear.quadratic_terms(model)):
            p.add_(0.05 * torch.randn(p.shape) if i % 3 else 0.0)
    return model


def _steps(model, make_opt, after=lambda opt: None, steps=3):
    opt = make_opt(model)
    gen = torch.Generator().manual_seed(1)
    for _ in range(steps):
        x, y = torch.randn(4, 3, 16, 16, generator=gen), torch.randint(0, 10, (4,), generator=gen)
        opt.zero_grad(set_to_none=True)
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
        after(opt)
    return [p.detach().clone() for p in model.parameters()]


def _bitwise(a, b) -> bool:
    return all(torch.equal(x, y) and torch.equal(x.signbit(), y.signbit()) for x, y in zip(a, b))


@pytest.mark.parametrize("nesterov", [False, True])
def test_one_pass_sgd_is_torch_sgd_bit_for_bit(nesterov):
    from quadnn_paper.engine.optim import OnePassSGD

    def groups(m):
        return relinear.param_groups(m, lr=0.1, lr_g=0.01, lr_b=0.03, weight_decay=5e-4, quadratic_decay="zero")

    kw = dict(lr=0.1, momentum=0.9, nesterov=nesterov)
    torch_sgd = _steps(_relinear_model(), lambda m: torch.optim.SGD(groups(m), **kw))
    one_pass = _steps(_relinear_model(), lambda m: OnePassSGD(groups(m), **kw))
    assert _bitwise(one_pass, torch_sgd)


@pytest.mark.parametrize("mode", [None, "l1", "l2"])
def test_relinear_decay_and_shrink_are_the_per_tensor_rules_bit_for_bit(mode):
    def per_tensor(model):  # the rules as written per tensor: what the multi-tensor ones must equal
        terms = [(p, g, ref) for _, p, g, ref in relinear.quadratic_terms(model)]

        @torch.no_grad()
        def after(opt):
            for group in opt.param_groups:
                if group.get("reference_weight_decay"):
                    keep = 1.0 - group["lr"] * group["reference_weight_decay"]
                    for p, ref in zip(group["params"], group["references"]):
                        p.sub_(ref).mul_(keep).add_(ref)
            for p, g, ref in terms if mode else ():
                alpha = 1e-3 if g == "g" else 2e-3
                p.sub_(alpha * torch.sign(p - ref)) if mode == "l1" else p.sub_(ref).mul_(1.0 - alpha).add_(ref)

        return after

    def multi_tensor(model):
        shrink = relinear.Shrink(model, mode, 1e-3, 2e-3) if mode else None

        def after(opt):
            relinear.ReferenceWeightDecay(opt).step()
            if shrink:
                shrink.step()

        return after

    def sgd(m):
        return torch.optim.SGD(relinear.param_groups(m, 0.1, 0.01, 0.03, 5e-4), lr=0.1, momentum=0.9)

    want = _relinear_model()
    got = _relinear_model()
    assert _bitwise(_steps(got, sgd, multi_tensor(got)), _steps(want, sgd, per_tensor(want)))


@pytest.mark.parametrize("pad", [0, 1, 4])
@pytest.mark.parametrize("flip", [False, True])
def test_the_batch_draw_is_a_crop_then_a_flip_by_the_plain_formula(pad, flip):
    from quadnn_paper.data import cifar as qdata

    data = qdata.load("digits", "data")
    data.pad, data.flip = pad, flip
    x = data.x_train[:16]
    got = qdata.augment(data, x, torch.Generator().manual_seed(5))
    g = torch.Generator().manual_seed(5)  # the same draws, in the documented order: offsets, then flips
    n, _, h, w = x.shape
    oy = torch.randint(0, 2 * pad + 1, (n,), generator=g) if pad else torch.zeros(n, dtype=torch.long)
    ox = torch.randint(0, 2 * pad + 1, (n,), generator=g) if pad else torch.zeros(n, dtype=torch.long)
    fl = torch.rand(n, generator=g) < 0.5 if flip else torch.zeros(n, dtype=torch.bool)
    xp = torch.nn.functional.pad(data.normalise(x), (pad,) * 4)
    crops = [xp[i, :, oy[i] : oy[i] + h, ox[i] : ox[i] + w] for i in range(n)]
    want = torch.stack([c.flip(-1) if f else c for c, f in zip(crops, fl)])
    assert torch.equal(got, want)


def test_adam_is_fused_exactly_when_every_parameter_is_on_a_gpu():
    from types import SimpleNamespace

    from quadnn_paper.engine.optim import fused_on

    on = lambda kind: SimpleNamespace(device=torch.device(kind))  # noqa: E731
    assert fused_on([{"params": [on("cuda"), on("cuda:1")]}, {"params": [on("cuda")]}]) is True
    assert fused_on([{"params": [on("cuda")]}, {"params": [on("cpu")]}]) is None  # torch refuses fused across devices
    assert fused_on([{"params": [on("cpu")]}]) is None and fused_on([{"params": []}]) is None
