"""The full profile against CUDA's rules, on a CPU-only machine.

A strict fake of the ``torch.cuda`` calls the engine makes, a stand-in compute device on which
whole runs train (every tensor of a step must be on it, as on a GPU), NCCL's collective rule,
KITTI's mix of image sizes, and ImageNet loaders sized by the task's CPUs.
"""

import json
import os
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image
from runs import small_run
from standin_device import DEVICE, StandInDevice, StrictCuda, StrictNCCL, to_cpu
from torch import nn

from quadnn_paper.data import kitti, tiny
from quadnn_paper.engine import RunConfig, RunStore, loop, run
from quadnn_paper.engine.distributed import SyncBatchNorm2d, sync_batchnorm
from quadnn_paper.engine.tasks import ImageFolderClassification, loader_workers, make_task
from quadnn_paper.engine.tiny import tiny_runs
from quadnn_paper.execution import gpu_check
from quadnn_paper.sections import imagenet
from quadnn_paper.sections import kitti_lapdepth as depth

pytestmark = pytest.mark.usefixtures("one_thread")


def tiny_cfg(**kw):
    quadratic = dict(
        model="cifar_qresnet20", train_limit=64, relinear="sg", lr_g=1e-3, eval_batch_size=256, device="auto"
    )
    return small_run(**{**quadratic, **kw})


# -- 1. the device of a single-GPU run ----------------------------------------------------------
def test_strict_cuda_fake_checks_arguments_as_torch_does(monkeypatch):
    real = torch.cuda.set_device
    with pytest.raises(ValueError) as torch_says:
        real(torch.device("cuda"))  # torch checks the index before it looks for a GPU
    fake = StrictCuda(1).install(monkeypatch)
    with pytest.raises(ValueError) as fake_says:
        torch.cuda.set_device(torch.device("cuda"))
    assert str(fake_says.value) == str(torch_says.value)
    with pytest.raises(RuntimeError, match="invalid device ordinal"):
        torch.cuda.set_device(torch.device("cuda", 1))
    torch.cuda.set_device(torch.device("cuda", 0))
    assert fake.current == 0


@pytest.mark.parametrize(
    "name,gpus,nranks,local_rank,expect",
    [("cuda", 1, 1, None, 0), ("auto", 1, 1, None, 0), ("cuda", 2, 2, "1", 1), ("cuda:1", 2, 1, None, 1)],
)
def test_cuda_device_always_has_an_index(monkeypatch, name, gpus, nranks, local_rank, expect):
    fake = StrictCuda(gpus).install(monkeypatch)
    if local_rank is None:
        monkeypatch.delenv("LOCAL_RANK", raising=False)
    else:
        monkeypatch.setenv("LOCAL_RANK", local_rank)
    device = loop._device(RunConfig(device=name, tf32=False))
    assert device == torch.device("cuda", expect) and fake.current == expect
    assert torch.backends.cudnn.benchmark and not torch.backends.cuda.matmul.allow_tf32


@pytest.mark.parametrize("name", ["auto", "cuda", "cuda:0", "cuda:1", "cpu"])
@pytest.mark.parametrize("local_rank", ["0", "1", "3"])
def test_the_process_group_and_the_loop_resolve_one_device(monkeypatch, name, local_rank):
    """Under torchrun (WORLD_SIZE 2), the GPU the process group makes current before NCCL starts
    is the GPU the training loop computes on, whatever the device name and LOCAL_RANK."""
    import torch.distributed as dist

    from quadnn_paper.engine import distributed

    fake = StrictCuda(2).install(monkeypatch)
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("LOCAL_RANK", local_rank)
    backends = []
    monkeypatch.setattr(dist, "is_initialized", lambda: False)
    monkeypatch.setattr(dist, "init_process_group", lambda backend, **kw: backends.append(backend))
    fake.current = None
    assert distributed.init_distributed(name)
    joined = fake.current
    device = loop._device(RunConfig(device=name))
    assert backends == ["gloo" if device.type == "cpu" else "nccl"]
    assert (joined is None and device.type == "cpu") or device == torch.device("cuda", joined)


# -- 2. every tensor on the compute device, collectives included --------------------------------
class _NoDDP(nn.Module):
    """DDP's place in the loop, recording how it was asked to treat buffers."""

    calls = []

    def __init__(self, module, **kw):
        super().__init__()
        self.module = module
        _NoDDP.calls.append(kw)

    def forward(self, *a):
        return self.module(*a)


@pytest.fixture
def two_ranks_on_a_standin_device(monkeypatch):
    """The engine as rank 0 of 2 computing on :data:`DEVICE`, collectives checked as NCCL does."""
    nccl = StrictNCCL(DEVICE).install(monkeypatch)
    monkeypatch.setattr(loop, "world", lambda: (0, 2))
    monkeypatch.setattr(loop, "_device", lambda cfg: DEVICE)
    monkeypatch.setattr(nn.parallel, "DistributedDataParallel", _NoDDP)
    save = RunStore.save_checkpoint
    monkeypatch.setattr(
        RunStore, "save_checkpoint", lambda self, cfg, name, obj, *a, **kw: save(self, cfg, name, to_cpu(obj), *a, **kw)
    )
    _NoDDP.calls.clear()
    return nccl


@pytest.mark.slow
def test_classification_run_computes_and_reduces_on_its_device(tmp_path, two_ranks_on_a_standin_device):
    nccl = two_ranks_on_a_standin_device
    with StandInDevice():
        res = run(tiny_cfg(), tmp_path)
    assert res["status"] == "finished" and res["test_error"] is not None
    # the per-epoch counters (loss, correct, images) were reduced on the device, once per epoch
    assert nccl.reduced == [((3,), DEVICE)] * 2
    assert _NoDDP.calls == [dict(broadcast_buffers=False)]  # BN synchronised: nothing to broadcast


def test_imagenet_ten_crop_evaluation_reduces_on_its_device(tmp_path, two_ranks_on_a_standin_device):
    nccl = two_ranks_on_a_standin_device
    (cfg,) = [c for c in imagenet.runs("smoke", data_root=tmp_path / "data") if c.model == "imagenet_resnet18"]
    cfg = cfg.replace(threads=1, train_limit=32, task_kwargs=dict(cfg.task_kwargs, max_per_class=4))
    with StandInDevice():
        res = run(cfg, tmp_path / "runs")
    assert res["status"] == "finished" and res["val_images"] == 20  # rank 0's half of 40
    assert nccl.reduced == [((3,), DEVICE), ((4,), DEVICE)]  # the epoch's counters, the 10-crop sums


@pytest.mark.slow
def test_depth_without_sync_bn_broadcasts_rank0_statistics(tmp_path, two_ranks_on_a_standin_device):
    cfg = depth.runs("smoke", data_dir=tmp_path / "kitti")[0]
    cfg = cfg.replace(
        epochs=1,
        model_kwargs=dict(cfg.model_kwargs, encoder="resnet10t"),
        task_kwargs=dict(cfg.task_kwargs, n_train=4, n_test=2, height=32, width=96),
    )
    with StandInDevice():
        res = run(cfg, tmp_path / "runs")
    assert res["status"] == "finished"
    assert _NoDDP.calls == [dict(broadcast_buffers=True)]


def test_standin_device_catches_a_stray_cpu_tensor():
    with StandInDevice():
        x = torch.ones(4).to(DEVICE)
        assert (x + torch.tensor(1.0)).device == DEVICE  # CPU scalars are allowed, as on CUDA
        with pytest.raises(RuntimeError, match="same device"):
            x + torch.ones(4)


def test_batch_norm_sync_is_torchs_on_cuda_ours_elsewhere():
    def net():
        return nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.Sequential(nn.BatchNorm2d(4)))

    on_cuda = sync_batchnorm(net(), torch.device("cuda", 0))
    assert sum(type(m) is nn.SyncBatchNorm for m in on_cuda.modules()) == 2
    on_cpu = sync_batchnorm(net(), "cpu")
    assert sum(type(m) is SyncBatchNorm2d for m in on_cpu.modules()) == 2


# -- 4. ImageNet loaders ----------------------------------------------------------------------------
def _imagefolder_task(tmp_path, **kw):
    (cfg,) = [c for c in imagenet.runs("smoke", data_root=tmp_path) if c.model == "imagenet_plain18"]
    return ImageFolderClassification(cfg.replace(**kw), 0, 1)


@pytest.mark.filterwarnings("ignore:This DataLoader will create")  # more workers than this machine's CPUs
def test_imagenet_workers_follow_slurm_cpus_per_task_and_loaders_are_built_once(tmp_path, monkeypatch):
    assert imagenet.protocol("full")["workers"] == "auto"
    assert {c.workers for c in imagenet.runs("full")} == {"auto"}
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(16)))  # a node's task, bound to 16
    monkeypatch.setenv("SLURM_CPUS_PER_TASK", "3")
    task = _imagefolder_task(tmp_path, workers="auto", train_limit=8)
    first = task.train_batches(0)
    next(first)
    loader = task._train_loader
    assert loader.num_workers == 2 and loader.persistent_workers  # one CPU left to feed the GPU
    first.close()
    second = task.train_batches(1)
    next(second)
    assert task._train_loader is loader  # the workers live across epochs
    second.close()
    monkeypatch.setenv("SLURM_CPUS_PER_TASK", "9")
    assert _imagefolder_task(tmp_path, workers="auto")._loader([0], 1).num_workers == 8
    # outside SLURM: the CPUs this process may use, shared by the node's ranks
    monkeypatch.delenv("SLURM_CPUS_PER_TASK")
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(16)))
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "4")
    assert loader_workers(RunConfig(workers="auto")) == 3


def test_loaders_pin_memory_only_for_a_gpu(tmp_path):
    (cfg,) = [c for c in imagenet.runs("smoke", data_root=tmp_path) if c.model == "imagenet_plain18"]
    assert ImageFolderClassification(cfg, 0, 1, torch.device("cuda", 0))._loader([0], 1).pin_memory
    assert not ImageFolderClassification(cfg, 0, 1, "cpu")._loader([0], 1).pin_memory


def test_imagenet_augmentation_is_the_same_for_any_number_of_workers(tmp_path):
    def epoch(workers):
        task = _imagefolder_task(tmp_path, workers=workers, train_limit=12)
        return [x for x, _, _ in task.train_batches(3)]

    one, two = epoch(1), epoch(2)
    assert all(torch.equal(a, b) for a, b in zip(one, two)) and len(one) == len(two) > 0


# -- 5. KITTI's image sizes ---------------------------------------------------------------------------
SMALL = [(h // 8, w // 8) for h, w in kitti.KITTI_SIZES]  # 46x155, 46x153, 46x154, 47x155
CROP, TRAIN_CROP = [352 // 8, 1216 // 8], [352 // 8, 704 // 8]


def test_kb_crop_batches_kittis_mixed_sizes(tmp_path):
    root = kitti.write_synthetic_kitti(tmp_path, n_train=4, n_test=4, seed=0, sizes=SMALL)
    sizes = {
        Image.open(root / line.split()[0]).size[::-1]
        for line in (root / "splits/eigen_train_files.txt").read_text().splitlines()
    }
    assert sizes == set(SMALL)
    raw = kitti.KittiSplit(root, "splits/eigen_train_files.txt")
    with pytest.raises(RuntimeError):  # what the first mixed batch did before the crop
        next(iter(torch.utils.data.DataLoader(raw, 4)))
    cropped = kitti.KittiSplit(root, "splits/eigen_train_files.txt", crop=CROP)
    rgb, gt, mask = next(iter(torch.utils.data.DataLoader(cropped, 4)))
    assert rgb.shape == (4, 3, *CROP) and gt.shape == mask.shape == (4, 1, *CROP)
    # the KB crop keeps the bottom rows, centred: the last row of the image is the last row kept
    h, w = SMALL[0]
    full = np.asarray(Image.open(root / raw.items[0][0]).convert("RGB"), dtype=np.float32) / 255.0
    left = (w - CROP[1]) // 2
    np.testing.assert_array_equal(rgb[0, :, -1].permute(1, 0).numpy(), full[h - 1, left : left + CROP[1]])


def test_depth_task_trains_on_random_crops_and_evaluates_mixed_sizes(tmp_path):
    cfg = depth.runs("smoke", data_dir=tmp_path)[0]
    kw = dict(cfg.task_kwargs, n_train=4, n_test=4, sizes=SMALL, train_crop=TRAIN_CROP)
    task = make_task(cfg.replace(task_kwargs=dict(kw, crop=CROP)), 0, 1)
    rgb, (gt, mask), n = next(task.train_batches(0))
    assert rgb.shape == (4, 3, *TRAIN_CROP) and gt.shape == (4, 1, *TRAIN_CROP) and n == 4
    uncropped = make_task(cfg.replace(task_kwargs=dict(kw, crop=None, train_crop=None)), 0, 1)
    assert len({tuple(uncropped.test_set[i][0].shape) for i in range(4)}) == 4

    class Mean(nn.Module):  # a stand-in model: any prediction of the image's size
        def forward(self, x):
            return x.mean(1, keepdim=True) * 80

    m = uncropped.evaluate(Mean(), torch.device("cpu"), False)  # no torch.stack over sizes
    assert m["test_images"] == 4 and np.isfinite(m["rmse"])


def test_tiny_kitti_has_the_real_mix_of_sizes_and_scaled_crops(tmp_path):
    root = tiny.write_tiny_data(tmp_path)
    lines = (root / "kitti/splits/eigen_train_files.txt").read_text().splitlines()
    sizes = {Image.open(root / "kitti" / ln.split()[0]).size[::-1] for ln in lines}
    assert len(sizes) > 1 and all(abs(w / h - 1242 / 375) < 0.1 for h, w in sizes)
    for cfg in tiny_runs(depth.runs("full"), tmp_path):
        assert cfg.task_kwargs["crop"] == [352 // tiny.KITTI_SCALE, 1216 // tiny.KITTI_SCALE]
        assert cfg.task_kwargs["train_crop"] == [352 // tiny.KITTI_SCALE, 704 // tiny.KITTI_SCALE]
        task = make_task(cfg, 0, 1)
        rgb, _, _ = next(task.train_batches(0))
        assert tuple(rgb.shape[-2:]) == tuple(cfg.task_kwargs["train_crop"])
        assert tuple(task.test_set[0][0].shape[-2:]) == tuple(cfg.task_kwargs["crop"])


# -- 6. the smaller ones --------------------------------------------------------------------------
def test_depth_loss_is_float32_under_autocast(tmp_path):
    task = make_task(
        depth.runs("smoke", data_dir=tmp_path)[0].replace(task_kwargs=dict(n_train=1, n_test=1, height=16, width=32)),
        0,
        1,
    )
    gen = torch.Generator().manual_seed(0)
    gt = torch.rand(2, 1, 8, 8, generator=gen) * 50 + 1
    pred = (gt * (1 + 0.01 * torch.rand(2, 1, 8, 8, generator=gen))).bfloat16()
    loss, _ = task.loss(pred, (gt, torch.ones_like(gt, dtype=torch.bool)))
    assert loss.dtype == torch.float32
    assert loss.item() == pytest.approx(task.loss(pred.float(), (gt, gt > 0))[0].item(), rel=0, abs=0)


def test_gpu_switches_do_not_rename_runs_but_tf32_off_does():
    base = RunConfig()
    assert "tf32" not in base.key()  # runs stored before the switch keep their ids
    same = base.replace(
        cudnn_benchmark=False,
        channels_last=False,
        pin_memory=False,
        data_on_device=False,
        recompute_budget=0.5,
        workers="auto",
    )
    assert same.run_id == base.run_id
    assert base.replace(tf32=False).run_id != base.run_id
    with pytest.raises(ValueError, match="'auto'"):
        RunConfig(workers="many")


def test_quadratic_layers_keep_everything_on_a_gpu_unless_told(monkeypatch):
    from quadnn.layers import QuadraticLayer

    StrictCuda(1).install(monkeypatch)
    cfg = tiny_cfg()
    task = make_task(cfg, 0, 1)
    model = task.build_model()
    impls = lambda: {m.implementation for m in model.modules() if isinstance(m, QuadraticLayer)}  # noqa: E731
    before = impls()
    loop._plan_for_device(model, cfg, torch.device("cpu"), task)
    assert impls() == before  # CPU: the model's own plan
    loop._plan_for_device(model, cfg, torch.device("cuda", 0), task)
    assert impls() == {loop.FASTEST[("cuda", False)]}  # everything kept: the fastest eager on a GPU
    loop._plan_for_device(model, cfg.replace(compile=True), torch.device("cuda", 0), task)
    assert impls() == {loop.FASTEST.get(("cuda", True), "speed")}
    loop._plan_for_device(model, cfg.replace(implementation="speed"), torch.device("cuda", 0), task)
    assert impls() == {"speed"}  # as told
    loop._plan_for_device(model, cfg.replace(recompute_budget=0.0), torch.device("cuda", 0), task)
    assert impls() == {"lean"}  # a memory plan is kept, not overridden by the fastest
    with pytest.raises(ValueError, match="implementation must be one of"):
        cfg.replace(implementation="quick")


def _depth_task(tmp_path, batch_size=16, **kw):
    cfg = depth.runs("smoke", data_dir=tmp_path / "kitti")[0]
    cfg = cfg.replace(
        model="quadratic_lapdepth",
        batch_size=batch_size,
        model_kwargs=dict(cfg.model_kwargs, encoder="resnet10t"),
        task_kwargs=dict(cfg.task_kwargs, n_train=2, n_test=1, height=64, width=128, **kw),
    )
    return cfg, make_task(cfg, 0, 1)


def test_depth_recompute_budget_follows_the_gpus_memory_and_says_so(tmp_path, monkeypatch, capsys):
    """Item 2: Quadratic-LapDepth keeping everything (budget 2) needs more than a 40 GB GPU has at
    the paper's batch; the engine picks the largest budget that fits and says so in the log."""
    from quadnn.layers import QuadraticLayer

    cfg, task = _depth_task(tmp_path)
    model = task.build_model()
    assert task.train_input() == (3, 64, 128)
    need = {b: loop.step_bytes(model, (3, 64, 128), 16, b, cfg.optimizer) for b in loop.BUDGETS}
    assert need[2.0] > need[1.0] > need[0.0]
    # a GPU between budget 1's and budget 2's needs
    StrictCuda(1, memory_gb=(need[1.0] + need[2.0]) / 2 / loop.MEMORY_HEADROOM / 2**30).install(monkeypatch)
    assert loop._plan_for_device(model, cfg, torch.device("cuda", 0), task) == 1.0
    assert {m.implementation for m in model.modules() if isinstance(m, QuadraticLayer)} > {"speed"}  # some recompute
    line = capsys.readouterr().err.strip()
    assert line.startswith("quadnn: recompute budget 1 on cuda:0") and "16 images of 3x64x128" in line
    # two ranks: half the images per GPU, and budget 2 fits again
    assert loop._plan_for_device(model, cfg, torch.device("cuda", 0), task, nranks=2) == 2.0
    # smaller than budget 0 needs: budget 0, and the line says what to do
    StrictCuda(1, memory_gb=need[0.0] / 2 / 2**30).install(monkeypatch)
    assert loop._plan_for_device(model, cfg, torch.device("cuda", 0), task) == 0.0
    assert "does not fit even recomputing everything" in capsys.readouterr().err


def test_step_bytes_counts_each_saved_storage_once():
    """The estimate is autograd's saved tensors: a ReLU after a convolution saves its output, the
    next convolution saves the same tensor as its input; it is counted once."""
    net = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.ReLU(), nn.Conv2d(8, 8, 3, padding=1, bias=False))
    got = loop.step_bytes(net, (3, 10, 10), 2, 2.0)
    params = sum(p.numel() for p in net.parameters()) * 4
    activations = (2 * 3 * 100 + 2 * 8 * 100) * 4  # the input (saved by conv 1) and relu's output
    assert got == activations + 3 * params


def test_in_memory_data_lives_on_the_device_and_augments_there():
    with StandInDevice():
        task = make_task(tiny_cfg(), 0, 2, DEVICE)
        x, y, n = next(task.train_batches(0))
        assert x.device == y.device == DEVICE and n == 32 and len(x) == 16
    cpu_x, cpu_y, _ = next(make_task(tiny_cfg(), 0, 2).train_batches(0))
    torch.testing.assert_close(x.elem, cpu_x, rtol=0, atol=0)  # the same draws on every device
    assert torch.equal(y.elem, cpu_y)


# -- 7. make gpu-check --------------------------------------------------------------------------------


def test_gpu_check_without_cuda_says_so_in_one_line_and_fails(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert gpu_check.main(["--out", str(tmp_path)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.strip().splitlines()) == 1 and "no CUDA device here" in err
    assert not (tmp_path / "report.json").exists()


def _fake_subprocess(calls, outputs):
    """``gpu_check._subprocess`` recording each command, answering from ``outputs[name]``."""

    def run(ctx, name, cmd, timeout=None):
        calls.append((name, cmd))
        code, text = outputs.get(name, (0, ""))
        log = ctx.out / "logs" / f"{name}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text(text)
        return code, "\n".join(text.splitlines()[-8:])

    return run


FINISHED = json.dumps(dict(status="finished", test_error=72.8, epoch_time=3.2))


def _epoch_row(model, compiled):
    row = dict(model=model, compiled=compiled, status="finished", epoch_seconds=2.5, compile_seconds=None)
    return dict(row, compile_seconds=30.0) if compiled else dict(row, floor_seconds=0.9)


EPOCH_OUTPUTS = {
    f"epoch_{m}" + ("_compiled" if c else ""): (0, json.dumps(_epoch_row(m, c)))
    for m in gpu_check.PAPER_EPOCH_SECONDS
    for c in (False, True)
}


def _bench_rows(equal=True):
    base = dict(machine="Stand-in GPU 0", batch_size=128, baseline="cifar_resnet20", time_ratio=1.0, launches=177)
    return "".join(
        json.dumps(dict(base, model=m, implementation=i, compiled=c, mem_ratio=1.5, max_rel_err=1e-5, equal=equal))
        + "\n"
        for m, i, c in [("cifar_resnet20", "conventional", False), ("cifar_qresnet20", "default", False)]
    )


@pytest.mark.parametrize("gpus", [1, 2])
def test_gpu_check_runs_every_check_under_the_strict_fake_and_reports(monkeypatch, tmp_path, capsys, gpus):
    StrictCuda(gpus).install(monkeypatch)
    calls = []
    tiny = json.dumps(dict(section="kitti_lapdepth", runs=2, finished=2, gpus=gpus))
    outputs = dict(smoke_train=(0, FINISHED), ddp=(0, FINISHED), tiny_section=(0, tiny), bench=(0, _bench_rows()))
    outputs.update(EPOCH_OUTPUTS)
    monkeypatch.setattr(gpu_check, "_subprocess", _fake_subprocess(calls, outputs))
    seen_devices = []

    def errors(*args, **kw):  # the numerics run on the GPU named, in every mode asked for
        modes, device = (args[2], args[3]) if len(args) > 2 else (args[0], args[1])
        seen_devices.append(device)
        return {m: 1e-6 for m in modes}

    monkeypatch.setattr(gpu_check, "layer_step_errors", errors)
    monkeypatch.setattr(gpu_check, "network_step_errors", errors)
    assert gpu_check.main(["--out", str(tmp_path), "--device", "cuda"]) == 0
    report = json.loads((tmp_path / "report.json").read_text())
    status = {c["name"]: c["status"] for c in report["checks"]}
    assert list(status) == list(gpu_check.CHECKS) and report["passed"]
    assert status["ddp"] == ("skip" if gpus == 1 else "pass")
    assert set(status.values()) == ({"pass", "skip"} if gpus == 1 else {"pass"})
    assert report["environment"]["gpus"][0] == dict(name="Stand-in GPU 0", capability="9.0", memory_gb=80.0)
    assert set(seen_devices) == {"cuda:0"}  # a bare "cuda" became an indexed device
    names = [n for n, _ in calls]
    assert names == ["smoke_train"] + (["ddp"] if gpus > 1 else []) + ["tiny_section", "bench", *EPOCH_OUTPUTS]
    cmd = dict(calls)
    assert cmd["smoke_train"][-4:-2] == ["--device", "cuda:0"] and "--profile" in cmd["smoke_train"]
    assert "--compile" in cmd["bench"] and {"default", "naive", "lean"} <= set(cmd["bench"])
    if gpus > 1:
        assert "--nproc-per-node=2" in cmd["ddp"]
    assert (tmp_path / "bench.json").read_text() == _bench_rows()
    md = (tmp_path / "report.md").read_text()
    assert "All checks passed" in md and gpu_check.FAILURES in md and "| ddp | " in md


def test_gpu_check_reports_each_failure_with_what_to_do(monkeypatch, tmp_path):
    StrictCuda(1).install(monkeypatch)
    outputs = dict(
        smoke_train=(1, "Traceback ...\nRuntimeError: CUDA error: no kernel image is available"),
        tiny_section=(0, json.dumps(dict(section="kitti_lapdepth", runs=2, finished=1, gpus=1))),
        bench=(0, _bench_rows(equal=False)),
    )
    monkeypatch.setattr(gpu_check, "_subprocess", _fake_subprocess([], outputs))
    monkeypatch.setattr(gpu_check, "layer_step_errors", lambda n, i, modes, d: {m: 0.2 for m in modes})
    monkeypatch.setattr(gpu_check, "network_step_errors", lambda modes, d: {m: ValueError("boom") for m in modes})
    assert gpu_check.main(["--out", str(tmp_path)]) == 1
    checks = {c["name"]: c for c in json.loads((tmp_path / "report.json").read_text())["checks"]}
    assert {n for n, c in checks.items() if c["status"] == "fail"} == {
        "smoke_train",
        "layers",
        "network",
        "tiny_section",
        "bench",
        "epoch",  # its runs printed nothing
    }
    assert "no kernel image" in checks["smoke_train"]["message"]
    assert "fp32: 2.0e-01 > 1e-04" in checks["layers"]["message"]
    assert "ValueError: boom" in checks["network"]["message"]
    assert all(c["todo"] for c in checks.values() if c["status"] == "fail")
    assert "Some checks FAILED" in (tmp_path / "report.md").read_text()


def test_gpu_check_epoch_reports_each_run_beside_the_paper_and_the_floor(monkeypatch, tmp_path):
    StrictCuda(1).install(monkeypatch)
    calls = []
    monkeypatch.setattr(gpu_check, "_subprocess", _fake_subprocess(calls, EPOCH_OUTPUTS))
    ctx = gpu_check.Context(device="cuda:0", out=tmp_path)
    check = gpu_check.check_epoch(ctx)
    assert check.status == "pass", check.message
    assert "cifar_qresnet20 compiled 2.50 s/epoch (paper 10.87), compiling 30 s" in check.message
    assert "cifar_resnet20 2.50 s/epoch (paper 10.43), CUDA-graph floor 0.90 s" in check.message
    assert all(cmd[cmd.index("--device") + 1] == "cuda:0" for _, cmd in calls)
    assert [("--_compiled" in cmd) for _, cmd in calls] == [False, True, False, True]
    assert len((tmp_path / "epoch.json").read_text().splitlines()) == 4


def test_gpu_check_epoch_run_trains_on_generated_cifar_and_prints_its_row(monkeypatch, tmp_path, capsys):
    # the child process's work, on the CPU, at 64 images instead of 50,000
    monkeypatch.setattr(gpu_check, "EPOCH_DATA", (64, 16))
    monkeypatch.setattr(gpu_check, "cuda_graph_step_seconds", lambda model, device, batch: 0.01)
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    torch.manual_seed(0)
    assert gpu_check.main(["--_epoch", "cifar_resnet20", "--device", "cpu", "--out", str(tmp_path)]) == 0
    row = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert row["status"] == "finished" and row["epoch_seconds"] > 0 and row["floor_seconds"] == 0.01
    assert not row["compiled"] and row["compile_seconds"] is None


def test_the_reports_link_names_a_heading_of_the_file_it_links():
    path, anchor = gpu_check.FAILURES.split("#")
    assert path == "docs/gpu.md"  # the manual that holds the table of failures
    text = (Path(__file__).parents[1] / path).read_text()
    assert anchor in {
        re.sub(r"[^a-z0-9 -]", "", h.lower()).strip().replace(" ", "-") for h in re.findall(r"^#+ (.*)$", text, re.M)
    }


def test_gpu_check_numerics_catch_a_fault_on_the_device(monkeypatch):
    """On the stand-in device (every tensor of the step must be on it) the float64 comparison
    passes; a layer that computes 0.1 % off on the device only (float32) fails it."""
    with StandInDevice():
        errs = gpu_check.layer_step_errors("full", "speed", ["fp32", "channels_last"], DEVICE)
    assert all(0 <= e <= gpu_check.LAYER_TOLERANCE[m] for m, e in errs.items()), errs
    from quadnn import QuadraticConv2d

    forward = QuadraticConv2d.forward
    monkeypatch.setattr(
        QuadraticConv2d, "forward", lambda self, x: forward(self, x) * (1.001 if x.dtype == torch.float32 else 1)
    )
    with StandInDevice():
        errs = gpu_check.layer_step_errors("full", "speed", ["fp32"], DEVICE)
    assert errs["fp32"] > gpu_check.LAYER_TOLERANCE["fp32"]


def test_gpu_check_network_step_on_the_standin_device():
    with StandInDevice():
        errs = gpu_check.network_step_errors(["fp32"], DEVICE, batch=4)
    assert 0 <= errs["fp32"] <= gpu_check.NETWORK_TOLERANCE["fp32"]


def test_make_gpu_check_with_python_given_uses_it_and_no_venv():
    root = Path(__file__).parents[1]
    given = subprocess.run(
        ["make", "-n", "-B", "gpu-check", "PYTHON=python3"], cwd=root, capture_output=True, text=True, check=True
    ).stdout
    assert "python3 -m quadnn_paper.execution.gpu_check" in given and "pip" not in given and "venv" not in given
    assert f'PYTHONPATH="{root}/core' in given
    venv = subprocess.run(["make", "-n", "-B", "gpu-check"], cwd=root, capture_output=True, text=True, check=True)
    assert ".venv/bin/python -m quadnn_paper.execution.gpu_check" in venv.stdout and "pip install" in venv.stdout


def test_local_runner_jobs_pickle_without_cloudpickle(tmp_path, monkeypatch):
    """The GPU machine's own PyTorch may lack cloudpickle: the local runner's jobs (a TrainRun and
    the result check) pickle with the standard library, and a job that cannot says what to install."""
    import sys

    from quadnn_paper.common.files import load_private_pickle
    from quadnn_paper.execution.execute import is_done, jobs
    from quadnn_paper.execution.runners import Job, LocalRunner

    monkeypatch.setitem(sys.modules, "cloudpickle", None)  # import cloudpickle raises ImportError
    runner = LocalRunner(tmp_path / "state", is_done=is_done(tmp_path / "runs"), workers=1, gpus=[])
    (job,) = jobs([tiny_cfg()], tmp_path / "runs")
    record = dict(key=job.key, logs=[str(tmp_path / "log")])
    (launched,) = runner._launch([job], {}, [record])
    spec = load_private_pickle(Path(launched["spec"]), tmp_path / "state")
    assert spec["fn"].cfg.run_id == job.key and spec["is_done"](job.key) is False
    with pytest.raises(RuntimeError, match="pip install cloudpickle"):
        runner._launch([Job(key="k", fn=lambda: None)], {}, [dict(record, key="k")])


def test_gpu_check_fp32_mode_keeps_tf32_off_through_backward(monkeypatch):
    """cuDNN's TF32 is on by default on CUDA: a check of fp32 that turned it off for the forward
    only would compare TF32 gradients with a float32 tolerance."""
    monkeypatch.setattr(torch.backends.cudnn, "allow_tf32", True)  # CUDA's default; restored after
    seen = []
    layer = nn.Linear(3, 2)
    layer.weight.register_hook(lambda g: seen.append(torch.backends.cudnn.allow_tf32))
    x, target = torch.randn(4, 3), torch.randn(4, 2)
    gpu_check._train_step(layer, x, target, torch.device("cpu"), "fp32")
    gpu_check._train_step(layer, x, target, torch.device("cpu"), "tf32")
    assert seen == [False, True] and torch.backends.cudnn.allow_tf32


# -- 8. the CPUs a job is given, the GPU a rank can see --------------------------------------------
FAKE_SBATCH = """#!/bin/sh
cp "$1" "{keep}"
echo "Submitted batch job 4242"
"""


def test_slurm_steps_get_the_jobs_cpus_per_task(tmp_path, monkeypatch):
    """Item 1: SLURM >= 22.05 gives an srun step 1 CPU per task unless SRUN_CPUS_PER_TASK says
    otherwise; the job script exports it before submitit's srun line."""
    from quadnn_paper.execution import execute

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    keep = tmp_path / "job.sbatch"
    (bin_dir / "sbatch").write_text(FAKE_SBATCH.format(keep=keep))
    (bin_dir / "sinfo").write_text("#!/bin/sh\necho 'gpu:8'\n")
    (bin_dir / "srun").write_text("#!/bin/sh\nexit 0\n")  # submitit looks for it before it submits
    for tool in ("sbatch", "sinfo", "srun"):
        (bin_dir / tool).chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    for var in ("QUADNN_GPUS_PER_RUN", "QUADNN_SLURM_CPUS_PER_TASK", "QUADNN_SLURM_MEM_GB"):
        monkeypatch.delenv(var, raising=False)
    cfg = imagenet.runs("full")[0]
    execute([cfg], tmp_path / "runs", "slurm", wait=False, progress=False)
    lines = keep.read_text().splitlines()
    export = 'if [ -n "${SLURM_CPUS_PER_TASK:-}" ]; then export SRUN_CPUS_PER_TASK="$SLURM_CPUS_PER_TASK"; fi'
    assert "#SBATCH --cpus-per-task=8" in lines and export in lines
    srun = next(i for i, ln in enumerate(lines) if ln.startswith("srun"))
    assert lines.index(export) < srun
    # and the line does what it says, in a shell with and without the variable
    for given, want in (("8", "8"), ("", "")):
        sh = f"SLURM_CPUS_PER_TASK={given}; {export}; echo ${{SRUN_CPUS_PER_TASK:-}}"
        assert subprocess.run(["sh", "-c", sh], capture_output=True, text=True).stdout.strip() == want


def test_workers_and_threads_stay_within_the_cpus_the_task_is_bound_to(monkeypatch, tmp_path):
    """Item 1: a step bound to 1 core (affinity) while SLURM_CPUS_PER_TASK says 8 gets no loader
    workers and one intra-op thread, not 7 workers and 8 threads on that core."""
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0})
    monkeypatch.setenv("SLURM_CPUS_PER_TASK", "8")
    assert loader_workers(RunConfig(workers="auto")) == 0
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(16)))
    assert loader_workers(RunConfig(workers="auto")) == 7  # bound to more: SLURM's figure holds
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(4)  # what OMP_NUM_THREADS=SLURM_CPUS_PER_TASK would give
        run(small_run(threads=None, epochs=1), tmp_path)
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


def test_local_runner_gives_each_job_its_share_of_the_cpus(tmp_path, monkeypatch):
    """Item 8: docs/reliability.md's claim, OMP_NUM_THREADS = CPUs (this process's affinity) // slots,
    unless the user set it."""
    from quadnn_paper.execution.runners import Job, local

    envs = []
    monkeypatch.setattr(local.subprocess, "call", lambda cmd, env, **kw: envs.append(env) or 0)  # GPU jobs
    monkeypatch.setattr(local.SlotWorker, "run", lambda self, spec, state, log, env: envs.append(env) or 0)  # CPU
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(12)))
    monkeypatch.setattr(os, "cpu_count", lambda: 64)  # the node's, not this process's
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    log = tmp_path / "log"
    runner = local.LocalRunner(tmp_path / "state", workers=3, gpus=[])
    runner._spawn(Job(key="k", fn=print), dict(logs=[str(log)], spec="x"), ["cpu0"])
    gpus = local.LocalRunner(tmp_path / "state", gpus=["0", "1", "2", "3"])
    gpus._spawn(Job(key="k", fn=print, gpus=1), dict(logs=[str(log)], spec="x"), ["2"])
    monkeypatch.setenv("OMP_NUM_THREADS", "5")
    runner._spawn(Job(key="k", fn=print), dict(logs=[str(log)], spec="x"), ["cpu0"])
    assert [e["OMP_NUM_THREADS"] for e in envs] == ["4", "3", "5"]
    assert envs[1]["CUDA_VISIBLE_DEVICES"] == "2"


def test_kitti_loads_with_the_tasks_cpus_in_the_full_profile(tmp_path, monkeypatch):
    """Item 3: the full profile's KITTI runs decode PNGs in loader workers (the task's CPUs less
    one), not in the training process; the smaller profiles keep 0 (one thread, tiny images)."""
    assert {c.workers for c in depth.runs("full")} == {"auto"}
    assert {c.workers for c in depth.runs("smoke")} == {0}
    assert [c.run_id for c in depth.runs("full")] == [c.replace(workers=0).run_id for c in depth.runs("full")]
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(16)))
    monkeypatch.setenv("SLURM_CPUS_PER_TASK", "8")
    (cfg,) = [c for c in tiny_runs(depth.runs("full"), tmp_path) if c.model == "lapdepth"]
    task = make_task(cfg.replace(model_kwargs=dict(cfg.model_kwargs, encoder="resnet10t")), 0, 1)
    loader = task._loader(task.train_set, 2)
    assert loader.num_workers == 7 and loader.persistent_workers


@pytest.mark.parametrize("visible,local_rank,expect", [(8, "5", 5), (1, "5", 0), (1, "0", 0), (4, "6", 2)])
def test_ranks_use_the_gpu_they_can_see(monkeypatch, visible, local_rank, expect):
    """Item 4: with per-task binding (--gpus-per-task=1, a site's --gpu-bind) rank 5 sees one GPU,
    cuda:0; cuda:LOCAL_RANK would be an invalid ordinal. The same index for init_distributed."""
    import torch.distributed as dist

    from quadnn_paper.engine.distributed import init_distributed

    fake = StrictCuda(visible).install(monkeypatch)
    monkeypatch.setenv("LOCAL_RANK", local_rank)
    assert loop._device(RunConfig(device="cuda")) == torch.device("cuda", expect) and fake.current == expect
    fake.current = None
    monkeypatch.setenv("WORLD_SIZE", "8")
    monkeypatch.setattr(dist, "is_initialized", lambda: False)
    monkeypatch.setattr(dist, "init_process_group", lambda backend, **kw: setattr(fake, "backend", backend))
    assert init_distributed("cuda") and fake.current == expect and fake.backend == "nccl"


RANK = """
import datetime, json, os, sys
import torch, torch.distributed as dist
from quadnn_paper.engine import RunConfig, loop, tasks
torch.set_num_threads(1)
dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=float(os.environ["T"])))
loop.RANKS_POLL_S = 0.5
seen = []
evaluate = tasks.DepthRegression.evaluate
def spy(self, model, device, amp):
    seen.append([b.double().sum().item() for b in model.buffers() if b.is_floating_point()])
    return evaluate(self, model, device, amp)
tasks.DepthRegression.evaluate = spy
print("ready", flush=True)
res = loop.run(RunConfig.from_dict(json.loads(sys.argv[1])), sys.argv[2])
print(json.dumps(dict(rank=dist.get_rank(), status=res["status"], trained_by=res["trained_by"]["pid"], buffers=seen)))
dist.destroy_process_group()
"""


def _two_ranks(cfg, out, timeout_s=20.0):
    """Start 2 gloo ranks on ``cfg``; (processes, a function that waits and returns their JSON lines)."""
    import sys

    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(gpu_check._free_port()), WORLD_SIZE="2")
    env.update(T=str(timeout_s), OMP_NUM_THREADS="1", PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", RANK, json.dumps(cfg.to_dict()), str(out)],
            env=dict(env, RANK=str(r), LOCAL_RANK=str(r)),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for r in range(2)
    ]

    assert [p.stdout.readline().strip() for p in procs] == ["ready", "ready"]  # both about to call run()

    def results():
        outs = [p.communicate(timeout=300) for p in procs]
        assert all(p.returncode == 0 for p in procs), [e[-2000:] for _, e in outs]
        return [json.loads(o.strip().splitlines()[-1]) for o, _ in outs]

    return procs, results


def _small_depth(tmp_path):
    cfg = depth.runs("smoke", data_dir=tmp_path / "kitti")[0]
    return cfg.replace(
        epochs=1,
        batch_size=4,
        model_kwargs=dict(cfg.model_kwargs, encoder="resnet10t"),
        task_kwargs=dict(cfg.task_kwargs, n_train=8, n_test=2, height=32, width=96),
    )


@pytest.mark.slow
def test_every_rank_waits_while_another_process_trains_the_run_then_reuses_it(tmp_path):
    """Item 5: the run's lock is held elsewhere (another job trains it) for longer than the ranks'
    collective timeout; all ranks wait together and then take the stored result. Before, rank 1
    went on into DDP's constructor alone and timed out there."""
    import time

    from quadnn_paper.engine.loop import _train, requested_data

    cfg, out = _small_depth(tmp_path), tmp_path / "runs"
    store = RunStore(out)
    with store.lock(cfg.run_id):
        procs, results = _two_ranks(cfg, out, timeout_s=5.0)
        time.sleep(10)  # longer than the ranks' collective timeout
        assert all(p.poll() is None for p in procs)  # both still waiting, neither failed
        mine = _train(cfg, store, 0, 1, True, requested_data(cfg))  # "another process" finishes it
    ranks = results()
    assert [r["status"] for r in ranks] == ["finished", "finished"]
    assert {r["trained_by"] for r in ranks} == {mine["trained_by"]["pid"]} and not any(r["buffers"] for r in ranks)


@pytest.mark.slow
def test_ranks_evaluate_the_saved_models_batch_norm_statistics(tmp_path):
    """Item 6: without synchronised BN, each rank's last forward updates its own running statistics;
    every rank evaluates rank 0's (what is saved), not its own."""
    cfg = _small_depth(tmp_path)
    assert not cfg.sync_bn
    _, results = _two_ranks(cfg, tmp_path / "runs", timeout_s=120.0)
    r0, r1 = sorted(results(), key=lambda r: r["rank"])
    assert r0["status"] == r1["status"] == "finished"
    assert len(r0["buffers"]) == 1 and r0["buffers"] == r1["buffers"]
    saved = torch.load(tmp_path / "runs" / cfg.run_id / "stage1.pt", weights_only=False)["model"]
    floats = [v.double().sum().item() for k, v in saved.items() if "running" in k]
    assert r0["buffers"][0] == pytest.approx(floats, rel=1e-12)


def test_a_file_system_without_locks_says_what_to_mount(tmp_path, monkeypatch, capsys):
    """Item 7: Lustre mounted without flock answers lockf with ENOSYS; the run stops with one line
    saying what to mount, not '[Errno 38] Function not implemented' deep in a traceback."""
    import errno
    import fcntl

    from quadnn_paper.execution import train

    def no_locks(fd, cmd, *a):
        raise OSError(errno.ENOSYS, "Function not implemented")

    monkeypatch.setattr(fcntl, "lockf", no_locks)
    with pytest.raises(OSError, match="mount it with -o flock") as e:
        with RunStore(tmp_path).lock("abc"):
            pass
    assert e.value.errno == errno.ENOSYS
    assert train.main(["--profile", "smoke", "--device", "cpu", "--out", str(tmp_path / "runs")]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "-o flock" in err and "build/cache" in err


def test_standin_device_refuses_a_cpu_scalar_where_cuda_does():
    """Item 8: CUDA takes a 0-dim CPU tensor in elementwise ops only; torch.stack of a device
    tensor and a CPU scalar fails there, so it fails on the stand-in too."""
    with StandInDevice():
        x = torch.ones(()).to(DEVICE)
        assert (x * torch.tensor(2.0)).device == DEVICE
        with pytest.raises(RuntimeError, match="same device"):
            torch.stack([x, torch.tensor(1.0)])
        with pytest.raises(RuntimeError, match="same device"):
            torch.cat([x[None], torch.tensor(1.0)[None]])
        assert torch.stack([x, torch.full((), 1.0, device=DEVICE)]).device == DEVICE


def _standin_is_cuda(monkeypatch):
    """The engine's CUDA-only steps taken on the stand-in device (loop, tasks, batch norm)."""
    from quadnn_paper.engine import distributed, tasks

    yes = lambda d: torch.device(d).type in ("cuda", DEVICE.type)  # noqa: E731
    for module in (loop, tasks, distributed):
        monkeypatch.setattr(module, "on_cuda", yes)


@pytest.mark.slow
def test_a_whole_run_takes_the_loops_cuda_branches_on_the_standin_device(tmp_path, monkeypatch, capsys):
    """Item 8: whole-run tests replaced loop._device, so the loop's CUDA-only branches never ran in
    one: the recompute budget from the GPU's memory, channels_last batches and model, the epoch's
    synchronisation. Here they run, every tensor of the step on the stand-in device."""
    from quadnn.layers import QuadraticLayer

    fake = StrictCuda(1).install(monkeypatch)
    _standin_is_cuda(monkeypatch)
    monkeypatch.setattr(loop, "_device", lambda cfg: DEVICE)
    save = RunStore.save_checkpoint
    monkeypatch.setattr(
        RunStore, "save_checkpoint", lambda self, cfg, name, obj, *a, **kw: save(self, cfg, name, to_cpu(obj), *a, **kw)
    )
    layouts, plans = [], []
    build = loop.make_task

    def task_spy(cfg, rank, world, device):
        task = build(cfg, rank, world, device)
        model_of = task.build_model

        def build_model(c=None):
            m = model_of(c)
            m.register_forward_pre_hook(
                lambda mod, a: layouts.append(a[0].is_contiguous(memory_format=torch.channels_last))
            )
            plans.append(m)
            return m

        task.build_model = build_model
        return task

    monkeypatch.setattr(loop, "make_task", task_spy)
    with StandInDevice():
        res = run(tiny_cfg(epochs=2), tmp_path)
    assert res["status"] == "finished"
    assert fake.synchronized == [DEVICE, DEVICE]  # once per epoch
    assert layouts and all(layouts)  # channels_last batches
    assert {m.implementation for m in plans[0].modules() if isinstance(m, QuadraticLayer)} == {"speed"}
    assert "quadnn: recompute budget 2 on meta" in capsys.readouterr().err


@pytest.mark.slow
def test_two_ranks_on_the_standin_device_use_torchs_sync_batchnorm(
    tmp_path, monkeypatch, two_ranks_on_a_standin_device
):
    """Item 8: the DDP branch with torch's SyncBatchNorm (CUDA's) in a whole run."""
    StrictCuda(1).install(monkeypatch)
    _standin_is_cuda(monkeypatch)
    kinds, sync = set(), loop.sync_batchnorm

    def spy(model, device):
        out = sync(model, device)
        kinds.update(type(m) for m in out.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm))
        return out

    monkeypatch.setattr(loop, "sync_batchnorm", spy)
    with StandInDevice():
        res = run(tiny_cfg(), tmp_path)
    assert res["status"] == "finished" and kinds == {nn.SyncBatchNorm}
