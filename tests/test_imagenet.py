"""ImageNet ResNet-18/34 family, the ImageFolder data path with 10-crop evaluation, and the protocols."""

import json

import pytest
import timm
import torch
from torch import nn

import quadnn.models  # noqa: F401  (registers the models)
from quadnn import QuadraticConv2d
from quadnn.models.imagenet_resnet import VARIANTS, ImageNetBasicBlock, ImageNetResNet
from quadnn.relinear import transfer_weights_
from quadnn_paper.data import imagefolder
from quadnn_paper.engine import RunConfig, run
from quadnn_paper.sections import imagenet as I

NEURON_OF = {"": "conventional", "q": "full", "parabolic_": "parabolic", "poly_": "poly"}


def n_params(m: nn.Module) -> int:
    return sum(p.numel() for p in m.parameters())


# -- models ----------------------------------------------------------------------------------------
def test_registry_names_and_kinds():
    ours = {
        n
        for n in timm.list_models("imagenet_*")
        if timm.models.model_entrypoint(n).__module__ == "quadnn.models.imagenet_resnet"
    }
    expected = {f"imagenet_{p}{net}{d}" for p in NEURON_OF for net in ("resnet", "plain") for d in (18, 34)}
    assert ours == expected == set(VARIANTS)
    for p, neuron in NEURON_OF.items():
        m = timm.create_model(f"imagenet_{p}resnet18", width=0.125, num_classes=7)
        assert m.neuron == neuron and m.shortcut == "B" and m.layers == (2, 2, 2, 2)
        convs = [type(b.conv1) for stage in (m.layer1, m.layer2, m.layer3, m.layer4) for b in stage]
        assert all(c is (nn.Conv2d if neuron == "conventional" else QuadraticConv2d) for c in convs)
        assert type(m.conv1) is nn.Conv2d and type(m.fc) is nn.Linear  # stem and classifier stay conventional
    assert timm.create_model("imagenet_plain34", device="meta").layers == (3, 4, 6, 3)
    # timm's own resnet18 is untouched
    assert timm.models.model_entrypoint("resnet18").__module__.startswith("timm.")


@pytest.mark.parametrize("depth,expected", [(18, 11_689_512), (34, 21_797_672)])
def test_conventional_parameter_counts_match_torchvision(depth, expected):
    ours = n_params(timm.create_model(f"imagenet_resnet{depth}", device="meta"))
    ref = n_params(timm.create_model(f"resnet{depth}", device="meta"))
    assert ours == ref == expected
    assert round(ours / 1e6, 2) == {18: 11.69, 34: 21.80}[depth]


def test_option_b_is_timms_resnet18_exactly():
    torch.manual_seed(0)
    ref = timm.create_model("resnet18", num_classes=10).eval()
    ours = timm.create_model("imagenet_resnet18", num_classes=10).eval()
    ours.load_state_dict(ref.state_dict(), strict=True)
    x = torch.randn(2, 3, 64, 64)
    torch.testing.assert_close(ours(x), ref(x), rtol=0, atol=1e-5)


@pytest.mark.parametrize("depth", [18, 34])
def test_quadratic_parameter_counts_computed(depth):
    conv = timm.create_model(f"imagenet_resnet{depth}", device="meta")
    block_w = sum(
        b.conv1.weight.numel() + b.conv2.weight.numel()
        for s in (conv.layer1, conv.layer2, conv.layer3, conv.layer4)
        for b in s
    )
    block_out = sum(
        b.conv1.out_channels + b.conv2.out_channels
        for s in (conv.layer1, conv.layer2, conv.layer3, conv.layer4)
        for b in s
    )
    base = n_params(conv)
    # The paper's neuron in full: + W_g, W_b and the biases b_r, b_g, c of every block conv;
    # parabolic and poly: + W_g and the biases b_r, b_g.
    assert n_params(timm.create_model(f"imagenet_qresnet{depth}", device="meta")) == base + 2 * block_w + 3 * block_out
    for kind in ("parabolic", "poly"):
        assert (
            n_params(timm.create_model(f"imagenet_{kind}_resnet{depth}", device="meta"))
            == base + block_w + 2 * block_out
        )
    # option A drops exactly the three projection shortcuts (1x1 conv + BN)
    a = n_params(timm.create_model(f"imagenet_resnet{depth}", shortcut="A", device="meta"))
    proj = sum(cin * cout + 2 * cout for cin, cout in ((64, 128), (128, 256), (256, 512)))
    assert base - a == proj
    assert n_params(timm.create_model(f"imagenet_plain{depth}", device="meta")) == a


def test_plain_has_no_shortcut():
    plain = timm.create_model("imagenet_plain18", width=0.125)
    res = timm.create_model("imagenet_resnet18", width=0.125)
    assert all(b.downsample is None and b.plain for b in plain.modules() if isinstance(b, ImageNetBasicBlock))
    assert sum(b.downsample is not None for b in res.modules() if isinstance(b, ImageNetBasicBlock)) == 3
    # With the residual branch silenced (bn2 = 0), a plain block outputs 0 and a residual block its input.
    x = torch.rand(2, 8, 6, 6)
    for net, want in ((plain, torch.zeros_like(x)), (res, x)):
        block = net.layer1[0].eval()
        nn.init.zeros_(block.bn2.weight)
        nn.init.zeros_(block.bn2.bias)
        torch.testing.assert_close(block(x), want)
    with pytest.raises(ValueError, match="plain"):
        timm.create_model("imagenet_plain18", shortcut="B")
    with pytest.raises(ValueError, match="shortcut"):
        ImageNetResNet(shortcut="C")


@pytest.mark.parametrize("net", ["resnet", "plain"])
@pytest.mark.parametrize("prefix", ["q", "parabolic_", "poly_"])
def test_quadratic_is_conventional_at_relinear_after_transfer(net, prefix):
    torch.manual_seed(0)
    conv = (
        timm.create_model(f"imagenet_{net}18", width=0.125, num_classes=5, shortcut="A")
        if net == "resnet"
        else timm.create_model(f"imagenet_{net}18", width=0.125, num_classes=5)
    )
    conv.train()
    with torch.no_grad():  # make BN statistics and affine parameters non-trivial
        conv(torch.randn(8, 3, 40, 40))
        for m in conv.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.2, 0.2)
    kw = dict(width=0.125, num_classes=5, **({"shortcut": "A"} if net == "resnet" else {}))
    quad = transfer_weights_(conv, timm.create_model(f"imagenet_{prefix}{net}18", **kw))
    conv.eval(), quad.eval()
    x = torch.randn(3, 3, 40, 40)
    torch.testing.assert_close(quad(x), conv(x), rtol=1e-4, atol=1e-5)
    with torch.no_grad():  # a moved quadratic term makes a difference
        quad.layer2[0].conv1.weight_g.add_(0.05 * torch.randn_like(quad.layer2[0].conv1.weight_g))
    assert not torch.allclose(quad(x), conv(x), atol=1e-4)


def test_features_only():
    f = timm.create_model("imagenet_qresnet18", features_only=True, width=0.125)
    feats = f(torch.randn(1, 3, 64, 64))
    assert [t.shape[1] for t in feats] == [8, 8, 16, 32, 64]
    assert [t.shape[-1] for t in feats] == [32, 16, 8, 4, 2]
    assert f.feature_info.reduction() == [2, 4, 8, 16, 32]


# -- data and evaluation ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def tiny_folder(tmp_path_factory):
    return imagefolder.write_digits_folder(tmp_path_factory.mktemp("digits") / "tree", size=16, max_per_class=3)


def test_digits_folder_layout_and_manifest(tiny_folder):
    for split in ("train", "val"):
        classes = sorted(p.name for p in (tiny_folder / split).iterdir())
        assert classes == [str(c) for c in range(10)]
        assert all(len(list((tiny_folder / split / c).glob("*.png"))) == 3 for c in classes)
    man = json.loads((tiny_folder / "manifest.json").read_text())
    assert man["counts"] == {"train": 30, "val": 30} and man["spec"]["size"] == 16
    train_names = {p.name for p in (tiny_folder / "train").rglob("*.png")}
    val_names = {p.name for p in (tiny_folder / "val").rglob("*.png")}
    assert not train_names & val_names  # disjoint split
    from PIL import Image

    assert Image.open(next((tiny_folder / "train" / "0").glob("*.png"))).size == (16, 16)


def test_loader_shapes_and_tencrop(tiny_folder):
    train, val = imagefolder.datasets(tiny_folder, crop=12, resize=16, scale=(0.35, 1.0))
    assert train.classes == val.classes == [str(c) for c in range(10)]
    x, y = train[0]
    assert x.shape == (3, 12, 12) and x.dtype == torch.float32 and y == 0
    v, _ = val[0]
    assert v.shape == (10, 3, 12, 12)
    # TenCrop: crops 5..9 are the mirror images of crops 0..4 (torchvision flips the whole image first)
    torch.testing.assert_close(v[5], v[1].flip(-1))  # left-flip of top-right = top-left of flipped
    torch.testing.assert_close(v[9], v[4].flip(-1))  # the centre crop, mirrored
    assert not torch.allclose(v[0], v[4])
    with pytest.raises(FileNotFoundError, match="ImageFolder"):
        imagefolder.datasets(tiny_folder / "nowhere")


class _CropVote(nn.Module):
    """Logits that depend on the crop index: crop k votes for class (label + k % 2)."""

    def __init__(self, labels):
        super().__init__()
        self.labels = labels

    def forward(self, x):
        n = x.shape[0] // 10
        out = torch.zeros(x.shape[0], 10)
        for i in range(n):
            for k in range(10):
                out[i * 10 + k, (self.labels[i] + (k >= 7)) % 10] = 1.0
        return out


class _Bright(nn.Module):
    """Class 3 for a bright image, 7 for a dark one."""

    def forward(self, x):
        bright = x.flatten(1).mean(1) > 0.5
        return nn.functional.one_hot(torch.where(bright, 3, 7), 10).float()


def tiny_run(folder, **kw):
    base = dict(
        task="imagefolder",
        model="imagenet_qresnet18",
        model_kwargs=dict(width=0.125, shortcut="A"),
        dataset="digits",
        task_kwargs=dict(image_size=16, max_per_class=3, resize=16, crop=12, scale=[0.35, 1.0]),
        epochs=1,
        batch_size=16,
        lr=0.025,
        lr_g=1e-5,
        lr_b=1e-5,
        data_dir=str(folder),
        progress=False,
    )
    base.update(kw)
    return RunConfig(**base)


def test_evaluate_averages_the_ten_crops(tiny_folder):
    from quadnn_paper.engine.tasks import ImageFolderClassification

    task = ImageFolderClassification(tiny_run(tiny_folder))
    y = torch.tensor([3, 7])
    x = torch.zeros(2, 10, 3, 4, 4)
    task.val_set = torch.utils.data.TensorDataset(x, y)
    ev = task.evaluate(_CropVote(y), torch.device("cpu"), amp=False)
    # 7 of 10 crops vote for the right class: the averaged logits pick it (one crop alone might not).
    assert (ev["top1_error"], ev["top5_error"], ev["val_images"]) == (0.0, 0.0, 2)
    # 7 crops vote for the wrong class, 3 for the right one: a top-5 hit but not a top-1 hit.
    ev = task.evaluate(_CropVote(y - 1), torch.device("cpu"), amp=False)
    assert (ev["top1_error"], ev["top5_error"]) == (100.0, 0.0)
    # the departure's predictions: every image's centre crop (TenCrop's fifth), not the vote
    x[:, task.CENTRE] = 1.0
    task.val_set, task._val_loader = torch.utils.data.TensorDataset(x, y), None
    pred, label = task.predictions(_Bright(), torch.device("cpu"), amp=False)
    assert pred.tolist() == [3, 3] and label.tolist() == y.tolist()


def test_run_end_to_end_and_cached(tiny_folder, tmp_path):
    cfg = tiny_run(tiny_folder)
    r = run(cfg, tmp_path / "runs")
    assert r["status"] == "finished" and r["n_crops"] == 10 and r["val_images"] == 30
    assert 0 <= r["top1_error"] <= 100 and 0 <= r["top5_error"] <= r["top1_error"]
    assert set(r["metrics"]) == {"val_loss", "top1_error", "top5_error", "val_images", "n_crops"}
    assert r["params"] == n_params(timm.create_model("imagenet_qresnet18", width=0.125, num_classes=10, shortcut="A"))
    assert set(r["history"][0]["lr"]) == {"linear", "g", "b"}
    assert r["history"][0]["lr"]["g"] == 1e-5
    assert json.loads(next((tmp_path / "runs").glob("*/result.json")).read_text())["top1_error"] == r["top1_error"]
    assert run(cfg, tmp_path / "runs") == json.loads(json.dumps(r))  # second call: from result.json
    # the quadratic terms' departure from the linear twin, over every validation image (the claims' gate)
    assert 0.0 <= r["departure"]["changed"] <= 100.0 and 0.0 <= r["departure"]["twin_error"] <= 100.0


# -- protocols ------------------------------------------------------------------------------------
def test_full_protocol_is_the_papers():
    P = I.protocol("full")
    assert P["data"] == "imagenet" and P["width"] == 1.0
    assert (P["batch_size"], P["lr"], P["momentum"], P["weight_decay"]) == (256, 0.1, 0.9, 1e-4)
    assert P["relinear"] == "sg" and P["lr_g"] == P["lr_b"] == 1e-5
    assert (P["resize"], P["crop"], P["scale"]) == (256, 224, (0.08, 1.0))
    assert sorted(P["models"]) == sorted(I.PAPER) and len(P["models"]) == 10
    assert set(I.PROTOCOLS) == {"smoke", "cpu", "full"}
    cfgs = I.runs("full")
    assert cfgs[0].data_dir.endswith("/data/imagenet") and cfgs[0].batch_size == 256 and cfgs[0].task == "imagefolder"
    assert {c.model for c in cfgs} == set(P["models"]) and cfgs[0].milestones == P["milestones"]


def test_paper_labels_map_20_to_18_and_32_to_34():
    assert I.PAPER_LABEL["imagenet_resnet18"] == "ResNet20" and I.PAPER_LABEL["imagenet_qresnet34"] == "QResNet32"
    assert I.PAPER_LABEL["imagenet_plain34"] == "plain-32"
    assert I.PAPER["imagenet_resnet34"] == 25.03 and I.PAPER["imagenet_qresnet34"] == 24.01


def test_digits_folder_rewritten_without_stale_images(tmp_path):
    root = imagefolder.write_digits_folder(tmp_path / "t", size=8, max_per_class=3)
    stamp = (root / "manifest.json").stat().st_mtime_ns
    assert imagefolder.write_digits_folder(root, size=8, max_per_class=3) == root  # same settings: untouched
    assert (root / "manifest.json").stat().st_mtime_ns == stamp
    imagefolder.write_digits_folder(root, size=8, max_per_class=2)
    assert len(list((root / "train").rglob("*.png"))) == 20 and len(list((root / "val").rglob("*.png"))) == 20
    assert I.folder_name(I.protocol("smoke")) == "digits-imagefolder-24-20"
    assert I.folder_name(I.protocol("full")) == "imagenet"


# -- the claims -------------------------------------------------------------------------------------
def _errors(q: float, r: float, seeds=range(4), spread=0.3):
    """Top-1 errors by model and seed: every QResNet at ``q``, every other network at ``r`` (+- spread)."""
    out = {}
    for m in I.MODELS[18] + I.MODELS[34]:
        base = q if "qresnet" in m else r
        out[m] = {s: base + spread * ((s * 7 + len(m)) % 3 - 1) for s in seeds}
    return out


@pytest.mark.parametrize(
    "q, r, moved, want",
    [
        (20.0, 25.0, 5.0, "supported"),  # 5 points better at every seed, terms acting
        (25.0, 20.0, 5.0, "contradicted"),  # 5 points worse
        (20.0, 25.0, 0.2, "not tested"),  # the terms changed 0.2 % of predictions: nothing quadratic tested
        # the rivals did not train: decided on counts, and 4 of 4 against 0 of 4 (Fisher's p 0.029)
        # does not survive Holm over the section's pairs
        (20.0, 95.0, 5.0, "undecided (trained 4/4 vs 0/4)"),
    ],
)
def test_the_claims_follow_the_paired_rule_and_the_departure_gate(q, r, moved, want):
    quadratic = [m for m in I.MODELS[18] + I.MODELS[34] if any(k in m for k in ("qresnet", "poly", "parabolic"))]
    moved_by = {m: moved for m in quadratic}  # a conventional network has no departure
    decided = I.claims(_errors(q, r), moved_by, n_classes=10)
    assert [c.id for c in decided] == ["imagenet-q-beats-r", "imagenet-q-beats-poly"]
    assert all(c.verdict_text.startswith(want) for c in decided), [c.verdict_text for c in decided]
    assert len(decided[1].pairs) == 4 and decided[1].paper.count(" vs ") == 4


def test_a_network_not_trained_at_the_profile_leaves_its_pairs_not_tested():
    errors = {m: v for m, v in _errors(20.0, 25.0).items() if m in I.MODELS[18]}  # depth 18 only (smoke)
    decided = I.claims(errors, {}, n_classes=10)
    assert decided[0].verdict_text == "not tested at this profile (1 of 2 pairs tested)"
    assert decided[1].verdict_text == "not tested at this profile (2 of 4 pairs tested)"


def test_a_run_that_did_not_finish_counts_at_chance():
    configs = I.runs("cpu")[:2]
    keys = [(c.model, c.seed) for c in configs]
    errors = I.seed_errors({keys[0]: dict(status="finished", top1_error=31.0), keys[1]: dict(status="diverged")}, 10)
    assert errors == {configs[0].model: {configs[0].seed: 31.0}, configs[1].model: {configs[1].seed: 90.0}}
