"""timm's training recipe on the zoo: the flags of timm's ``train.py`` that reach the model.

timm's ``train.py`` lives at the root of timm's repository and is not part of the installed
package, so these tests make the calls it makes with its flags, through timm's own functions:
``create_model`` with the keyword set of train.py's call (``drop_rate``, ``drop_path_rate``,
``drop_block_rate``, ``global_pool``, ``bn_momentum``, ``bn_eps``, ``scriptable``,
``checkpoint_path``; None where a flag is unset, which ``create_model`` drops), then
``model.set_grad_checkpointing(enable=True)`` (``--grad-checkpointing``),
``resolve_data_config``, ``create_optimizer_v2(model, **optimizer_kwargs(cfg=args))`` (its
``--layer-decay`` groups by ``model.group_matcher``), ``create_scheduler_v2``, ``ModelEmaV3`` and
``dispatch_clip_grad``, and the steps of train.py's ``train_one_epoch`` on generated data.
One tiny model per family (a quarter or an eighth of the width, 32x32 inputs, three steps).
"""

from types import SimpleNamespace

import pytest
import timm
import torch
from timm.data import resolve_data_config
from timm.layers import DropPath
from timm.optim import create_optimizer_v2, optimizer_kwargs
from timm.scheduler import create_scheduler_v2
from timm.utils import ModelEmaV3, dispatch_clip_grad

import quadnn  # noqa: F401  (registers the models)

pytestmark = pytest.mark.usefixtures("one_thread")

# one model per family and kind of block, small: name -> width
TINY = {
    "cifar_qresnet20": 0.25,
    "cifar_resnet20": 0.25,
    "imagenet_qresnet18": 0.125,
    "cifar_qvgg16": 0.125,
}
RESIDUAL = [n for n in TINY if "vgg" not in n]

# train.py's flags: the default of each, and the value the tests set
FLAGS = dict(drop=0.0, drop_path=None, drop_block=None, gp=None, bn_momentum=None, bn_eps=None, torchscript=None)


def create(name, **flags):
    """``timm.create_model`` as train.py calls it (flags by train.py's names)."""
    args = SimpleNamespace(**{**FLAGS, **flags})
    return timm.create_model(
        name,
        pretrained=False,
        in_chans=3,
        num_classes=10,
        drop_rate=args.drop,
        drop_path_rate=args.drop_path,
        drop_block_rate=args.drop_block,
        global_pool=args.gp,
        bn_momentum=args.bn_momentum,
        bn_eps=args.bn_eps,
        scriptable=args.torchscript,
        checkpoint_path=None,
        width=TINY[name],
    )


def train_steps(model, grad_checkpointing=False, layer_decay=None, steps=3):
    """train.py's setup and ``train_one_epoch`` steps on generated data; the losses."""
    if grad_checkpointing:
        model.set_grad_checkpointing(enable=True)
    data_config = resolve_data_config({}, model=model)
    args = SimpleNamespace(
        opt="sgd", lr=0.05, weight_decay=1e-4, momentum=0.9, layer_decay=layer_decay, opt_eps=None, opt_betas=None
    )
    optimizer = create_optimizer_v2(model, **optimizer_kwargs(cfg=args))
    scheduler, _ = create_scheduler_v2(optimizer, sched="cosine", num_epochs=1, updates_per_epoch=steps)
    ema = ModelEmaV3(model, decay=0.9)
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(steps, 4, *data_config["input_size"], generator=gen)[..., :32, :32]
    y = torch.randint(0, 10, (steps, 4), generator=gen)
    loss_fn, losses = torch.nn.CrossEntropyLoss(), []
    model.train()
    for i in range(steps):
        loss = loss_fn(model(x[i]), y[i])
        optimizer.zero_grad()
        loss.backward()
        dispatch_clip_grad(model.parameters(), value=5.0, mode="norm")
        optimizer.step()
        ema.update(model, step=i)
        scheduler.step_update(num_updates=i + 1)
        losses.append(loss.item())
    return losses, optimizer


@pytest.mark.parametrize("name", list(TINY))
def test_train_py_runs_with_each_model_flag(name):
    flags = [
        dict(drop=0.1),
        dict(bn_momentum=0.05, bn_eps=1e-3),
        dict(drop_path=0.2) if name in RESIDUAL else {},
    ]
    for f in flags:
        losses, _ = train_steps(create(name, **f))
        assert all(torch.isfinite(torch.tensor(losses))), (f, losses)
    losses, _ = train_steps(create(name), grad_checkpointing=True)
    assert all(torch.isfinite(torch.tensor(losses)))
    losses, optimizer = train_steps(create(name), layer_decay=0.65)
    scales = sorted({g["lr_scale"] for g in optimizer.param_groups})
    assert len(scales) > 3 and scales[-1] == 1.0  # stem, blocks, then the classifier at the full rate


@pytest.mark.parametrize("name", RESIDUAL)
def test_drop_path_is_timms_stochastic_depth(name):
    model = create(name, drop_path=0.2)
    paths = [m.drop_path for m in model.modules() if hasattr(m, "drop_path")]
    rates = [p.drop_prob if isinstance(p, DropPath) else 0.0 for p in paths]
    # rising linearly from 0 at the first block to the rate at the last, as timm's ResNets
    assert rates[0] == 0.0 and rates[-1] == pytest.approx(0.2)
    assert all(b > a for a, b in zip(rates, rates[1:]))
    plain = create(name)
    plain.load_state_dict(model.state_dict())
    x = torch.randn(8, 3, 32, 32)
    with torch.no_grad():
        torch.testing.assert_close(model.eval()(x), plain.eval()(x), rtol=0, atol=0)  # eval: no drop
        model.train()
        for m in model.modules():
            if hasattr(m, "drop_path"):
                m.bn2.weight.fill_(1.0)  # a zero-initialised last norm would hide the dropped branch
            if isinstance(m, torch.nn.BatchNorm2d):
                m.eval()  # its running statistics: the outputs differ by the dropped branches alone
        outs = []
        for seed in range(3):
            torch.manual_seed(seed)
            outs.append(model(x))
        assert not torch.equal(outs[0], outs[1]) or not torch.equal(outs[0], outs[2])  # dropped at random


@pytest.mark.parametrize("name", list(TINY))
def test_bn_momentum_and_eps_reach_every_batch_norm(name):
    model = create(name, bn_momentum=0.05, bn_eps=1e-3)
    norms = [m for m in model.modules() if isinstance(m, torch.nn.BatchNorm2d)]
    assert norms and all(m.momentum == 0.05 and m.eps == 1e-3 for m in norms)
    assert all(
        m.momentum == 0.1 and m.eps == 1e-5 for m in create(name).modules() if isinstance(m, torch.nn.BatchNorm2d)
    )


@pytest.mark.parametrize("name", list(TINY))
def test_grad_checkpointing_gives_the_same_gradients(name):
    torch.manual_seed(0)
    model = create(name).double()
    for m in model.modules():  # every term random, so the quadratic layers count
        if isinstance(m, quadnn.QuadraticLayer) or isinstance(m, torch.nn.BatchNorm2d):
            with torch.no_grad():
                for p in m.parameters():
                    p.add_(torch.randn_like(p) * 0.1)
    x = torch.randn(2, 3, 32, 32, dtype=torch.float64)
    grads = []
    for enable in (False, True):
        model.set_grad_checkpointing(enable)
        model.zero_grad()
        model(x).square().sum().backward()
        grads.append([p.grad.clone() for p in model.parameters()])
    torch.testing.assert_close(grads[0], grads[1], rtol=1e-10, atol=1e-10)
    assert model.grad_checkpointing


def test_group_matcher_groups_stem_blocks_and_classifier():
    from timm.models import group_parameters

    model = create("cifar_qresnet20")
    fine = group_parameters(model, model.group_matcher(coarse=False))
    coarse = group_parameters(model, model.group_matcher(coarse=True))
    assert len(fine) == 1 + 9 + 1  # stem, nine blocks, classifier
    assert len(coarse) == 1 + 3 + 1  # stem, three stages, classifier
    assert set(fine[0]) == {"conv1.weight", "bn1.weight", "bn1.bias"}
    named = {n for n, _ in model.named_parameters()}
    assert {n for g in fine.values() for n in g} == named


@pytest.mark.parametrize("name", ["imagenet_qplain18", "cifar_qvgg16"])
def test_drop_path_without_a_residual_branch_is_refused_in_one_line(name):
    with pytest.raises(ValueError, match=r"drop_path_rate=0.1: this network has no residual branch") as e:
        timm.create_model(name, drop_path_rate=0.1, width=0.125)
    assert "\n" not in str(e.value)
