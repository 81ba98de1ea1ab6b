"""The full profile against CUDA's rules, on a CPU-only machine (issue 22).

A strict fake of the ``torch.cuda`` calls the engine makes, a stand-in compute device on which
whole runs train (every tensor of a step must be on it, as on a GPU), NCCL's collective rule,
KITTI's mix of image sizes, and ImageNet loaders sized by the task's CPUs.
"""

import os

import numpy as np
import pytest
import torch
from PIL import Image
from runs import small_run
from standin_device import DEVICE, StandInDevice, StrictCuda, StrictNCCL, to_cpu
from torch import nn

from quadnn_paper.data import tiny
from quadnn_paper.engine import RunConfig, RunStore, loop, run
from quadnn_paper.engine.distributed import SyncBatchNorm2d, sync_batchnorm
from quadnn_paper.engine.tasks import ImageFolderClassification, loader_workers, make_task
from quadnn_paper.sections import imagenet
from quadnn_paper.sections import kitti_lapdepth as depth
from quadnn_paper.sections._tiny import tiny_runs

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
    device = loop._device(RunConfig(device=name, tf32=False), nranks)
    assert device == torch.device("cuda", expect) and fake.current == expect
    assert torch.backends.cudnn.benchmark and not torch.backends.cuda.matmul.allow_tf32


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
    monkeypatch.setattr(loop, "_device", lambda cfg, nranks: DEVICE)
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
SMALL = [(h // 8, w // 8) for h, w in depth.KITTI_SIZES]  # 46x155, 46x153, 46x154, 47x155
CROP, TRAIN_CROP = [352 // 8, 1216 // 8], [352 // 8, 704 // 8]


def test_kb_crop_batches_kittis_mixed_sizes(tmp_path):
    root = depth.write_synthetic_kitti(tmp_path, n_train=4, n_test=4, seed=0, sizes=SMALL)
    sizes = {
        Image.open(root / line.split()[0]).size[::-1]
        for line in (root / "splits/eigen_train_files.txt").read_text().splitlines()
    }
    assert sizes == set(SMALL)
    raw = depth.KittiSplit(root, "splits/eigen_train_files.txt")
    with pytest.raises(RuntimeError):  # what the first mixed batch did before the crop
        next(iter(torch.utils.data.DataLoader(raw, 4)))
    cropped = depth.KittiSplit(root, "splits/eigen_train_files.txt", crop=CROP)
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


def test_quadratic_layers_keep_everything_on_a_gpu_unless_told():
    from quadnn.layers import QuadraticLayer

    cfg = tiny_cfg()
    model = make_task(cfg, 0, 1).build_model()
    impls = lambda: {m.implementation for m in model.modules() if isinstance(m, QuadraticLayer)}  # noqa: E731
    before = impls()
    loop._plan_for_device(model, cfg, torch.device("cpu"), 1)
    assert impls() == before  # CPU: the model's own plan
    loop._plan_for_device(model, cfg, torch.device("cuda", 0), 1)
    assert impls() == {"speed"}
    loop._plan_for_device(model, cfg.replace(recompute_budget=0.0), torch.device("cuda", 0), 1)
    assert impls() == {"lean"}


def test_in_memory_data_lives_on_the_device_and_augments_there():
    with StandInDevice():
        task = make_task(tiny_cfg(), 0, 2, DEVICE)
        x, y, n = next(task.train_batches(0))
        assert x.device == y.device == DEVICE and n == 32 and len(x) == 16
    cpu_x, cpu_y, _ = next(make_task(tiny_cfg(), 0, 2).train_batches(0))
    torch.testing.assert_close(x.elem, cpu_x, rtol=0, atol=0)  # the same draws on every device
    assert torch.equal(y.elem, cpu_y)
