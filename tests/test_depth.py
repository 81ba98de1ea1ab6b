"""KITTI depth (quadnn_paper.sections.kitti_lapdepth, imported as ``depth``): metrics, KITTI-format I/O, loader
crop/cap, quadratic encoder at init, the paper's protocol."""

import math

import numpy as np
import pytest
import torch

from quadnn_paper.data import kitti
from quadnn_paper.engine import lapdepth
from quadnn_paper.sections import kitti_lapdepth as depth


def test_metrics_hand_computed_with_invalid_pixels_masked():
    gt = torch.tensor([[2.0, 4.0, 0.0, 100.0, 8.0]])  # 0 (no measurement) and 100 m (> cap) are invalid
    pred = torch.tensor([[1.0, 5.0, 3.0, 50.0, 8.0]])
    m = lapdepth.depth_metrics(pred, gt)
    # valid pixels: (p, g) = (1, 2), (5, 4), (8, 8)
    assert m["abs_rel"] == pytest.approx((0.5 + 0.25 + 0.0) / 3)
    assert m["sq_rel"] == pytest.approx((1 / 2 + 1 / 4 + 0.0) / 3)
    assert m["rmse"] == pytest.approx(math.sqrt((1 + 1 + 0) / 3))
    assert m["rmse_log"] == pytest.approx(math.sqrt((math.log(2) ** 2 + math.log(1.25) ** 2) / 3))
    # ratios max(p/g, g/p): 2, 1.25, 1 -> < 1.25: 1; < 1.5625: 2; < 1.953125: 2
    assert m["d1"] == pytest.approx(1 / 3)
    assert m["d2"] == pytest.approx(2 / 3)
    assert m["d3"] == pytest.approx(2 / 3)
    # an extra mask removes a pixel as well
    m2 = lapdepth.depth_metrics(pred, gt, mask=torch.tensor([[True, True, True, True, False]]))
    assert m2["abs_rel"] == pytest.approx((0.5 + 0.25) / 2)
    with pytest.raises(ValueError):
        lapdepth.depth_metrics(pred, torch.zeros_like(gt))


def test_metrics_clip_prediction_to_range():
    m = lapdepth.depth_metrics(torch.tensor([120.0]), torch.tensor([40.0]))
    assert m["rmse"] == pytest.approx(40.0)  # prediction clipped to 80 m


def test_depth_png_round_trip(tmp_path):
    d = np.array([[0.0, 1.0, 12.34567], [79.99, 150.0, 0.5]], dtype=np.float32)
    kitti.write_depth_png(tmp_path / "d.png", d)
    back = kitti.read_depth_png(tmp_path / "d.png")
    assert back.dtype == np.float32 and back.shape == d.shape
    np.testing.assert_allclose(back, d, atol=0.5 / 256 + 1e-6)
    assert back[0, 0] == 0.0


def test_loader_crop_cap_and_synthetic_files(tmp_path):
    root = kitti.write_synthetic_kitti(tmp_path / "kitti", n_train=2, n_test=2, height=48, width=96, seed=1)
    assert len((root / "splits" / "eigen_test_files.txt").read_text().splitlines()) == 2
    ds = kitti.KittiSplit(root, "splits/eigen_test_files.txt", max_depth=80.0, garg=True)
    rgb, gt, mask = ds[0]
    assert rgb.shape == (3, 48, 96) and gt.shape == mask.shape == (1, 48, 96)
    assert 0.0 <= float(rgb.min()) and float(rgb.max()) <= 1.0
    raw = kitti.read_depth_png(root / ds.items[0][1])
    assert (raw >= 80).any()  # the synthetic ground reaches beyond the cap ...
    assert float(gt.max()) < 80.0  # ... and the loader drops it
    assert not mask[0][~torch.from_numpy(kitti.garg_crop_mask(48, 96))].any()  # nothing outside the crop
    assert (gt[mask] > 0).all() and mask.any()
    assert (raw[:10] == 0).all()  # sky / above the horizon: no measurement


def test_synthetic_tree_follows_the_last_settings(tmp_path):
    # smoke, then cpu, then smoke again into the same folder (make test after make paper)
    split = tmp_path / "kitti" / "splits" / "eigen_train_files.txt"
    for n in (2, 3, 2):
        kitti.write_synthetic_kitti(tmp_path / "kitti", n_train=n, n_test=1, height=16, width=32)
        assert len(split.read_text().splitlines()) == n


def test_loader_missing_data_message(tmp_path):
    with pytest.raises(FileNotFoundError, match="data/kitti"):
        kitti.KittiSplit(tmp_path / "nowhere", "splits/eigen_test_files.txt")
    (tmp_path / "k").mkdir()
    with pytest.raises(FileNotFoundError, match="eigen_test_files"):
        kitti.KittiSplit(tmp_path / "k", "splits/eigen_test_files.txt")


def test_quadratic_encoder_matches_conventional_at_init():
    torch.manual_seed(0)
    conv = lapdepth.LapDepth("resnet18", decoder_width=16).eval()
    quad = lapdepth.quadratic_lapdepth("resnet18", decoder_width=16, conventional=conv).eval()
    assert sum(p.numel() for p in quad.parameters()) > sum(p.numel() for p in conv.parameters())
    x = torch.rand(1, 3, 64, 96)
    with torch.no_grad():
        a, b = conv(x), quad(x)
    assert a.shape == (1, 1, 64, 96) and float(a.min()) > 0 and float(a.max()) < 80
    torch.testing.assert_close(a, b)
    # optimiser groups: quadratic terms in their own groups, decoder without weight decay
    from quadnn_paper.engine.tasks import DepthRegression

    task = DepthRegression.__new__(DepthRegression)  # the optimiser groups need no data
    task.cfg = depth.runs("full")[1]
    task.kw = dict(lapdepth.DATA_DEFAULTS, **task.cfg.task_kwargs)
    from quadnn_paper.engine.optim import param_groups

    groups = {g["name"]: g for g in param_groups(task.cfg, quad, task)}
    assert groups["decoder"]["weight_decay"] == 0.0 and groups["linear"]["weight_decay"] == 5e-4
    assert groups["g"]["lr"] == 1e-5 and groups["b"]["lr"] == 1e-5


def test_full_protocol_is_the_papers():
    full = depth.PROTOCOLS["full"]
    assert set(depth.PROTOCOLS) == {"smoke", "cpu", "full"}
    assert full["encoder"] == "resnext101_32x8d" and full["data"] == "kitti"
    assert full["optimizer"] == "AdamW" and tuple(full["betas"]) == (0.9, 0.999)
    assert full["batch_size"] == 16 and full["epochs"] == 50
    assert full["weight_decay_encoder"] == 5e-4 and full["weight_decay_decoder"] == 0.0
    assert full["lr"] == 1e-4 and full["end_lr"] == 1e-5 and full["lr_power"] == 0.5
    assert full["max_depth"] == 80.0 and (full["n_train"], full["n_test"]) == (23488, 697)
    (lap, quad) = depth.runs("full")
    assert (lap.model, quad.model, lap.optimizer, lap.schedule) == ("lapdepth", "quadratic_lapdepth", "adamw", "poly")
    assert (lap.lr, lap.end_lr, lap.lr_power, lap.weight_decay, lap.batch_size) == (1e-4, 1e-5, 0.5, 5e-4, 16)
    assert lap.data_dir.endswith("/data/kitti") and lap.dataset == "kitti" and quad.lr_g == 1e-5
    assert depth.PAPER["Quadratic-LapDepth"] == dict(sq_rel=0.200, rmse=0.427)
