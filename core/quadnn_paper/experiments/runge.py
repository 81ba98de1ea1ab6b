"""The Runge experiment: a quadratic ReLU network fits R(x) = 1/(1+16x^2) from 33 points, every run of
every strategy trained together (the section :mod:`quadnn_paper.sections.runge` computes it).

The network is ``1-8-8-8-8-1`` with five :class:`~quadnn.QuadraticLinear` layers (``neuron="full"``)
and a ReLU after each hidden layer, so every piece of its output is a polynomial of degree at
most ``2**5 = 32``. It is trained on the 33 equispaced points of ``[-5, 5]`` (full batch, mean
squared error) and scored by the RMSE on 100 equispaced points of ``[-5, 5]``.

Strategies (the paper's learning rates and shrink factors; the paper does not name the
optimiser for this experiment, we use Adam with torch's defaults):

=================  =======================  ===============================================
``regular``        random init of all terms  every term drawn as torch draws ``nn.Linear``
                                             parameters, U(-1/sqrt(fan_in), 1/sqrt(fan_in));
                                             one lr 3e-4 for everything
``relinear-init``  ReLinear init             one lr 3e-4, no shrinking (our control: the
                                             initialisation alone, not in the paper)
``sw-l1``          ReLinear init             lr 3e-4; l1 shrink alpha_g = alpha_b = 1e-4
``sw-l2``          ReLinear init             lr 3e-4; l2 shrink beta_g = beta_b = 1e-4
``sg``             ReLinear init             lr 3e-4, lr_g = lr_b = 1.5e-4
=================  =======================  ===============================================

A seed fixes the linear branch (``weight``, ``bias``) of every layer, so all strategies of one
seed start from the same linear network; ``regular`` then also draws its quadratic terms.

Speed: the reference way to train one run is :func:`train_reference` (a plain loop over a
torch model, its Adam made by :func:`quadnn_paper.engine.optim.make_optimizer` like every
optimiser of the engine, over :func:`quadnn.relinear.param_groups`, and
:class:`quadnn.relinear.Shrink`). :func:`train_batched` trains all runs of all strategies at
once: their parameters live in one ``(runs, n_params)`` float64 tensor, the forward pass is a
handful of batched matrix products, and Adam and the shrink rules act on that one tensor with
per-element learning rates and shrink factors. Adam and the shrink rules are elementwise and
the runs' losses are summed, so this computes exactly what the independent runs compute (a
test checks it against :func:`train_reference`). Why not ``torch.func`` (``stack_module_state``,
``vmap``, ``functional_call``) with torch's own Adam: Adam takes one rate per parameter group and the
strategies' rates differ, so it needs one stacked ensemble and one Adam per strategy; measured on this
project's CPU (one thread, 25 runs, 300 steps) that took 4.3 s against 0.49 s here, for the same
parameters (``tests/test_runge.py`` holds the two equal).
"""

from __future__ import annotations

import json
import math
import time
import warnings
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from quadnn.layers import QuadraticLinear
from quadnn.relinear import Shrink, param_groups, random_init_
from quadnn_paper.analysis.piecewise import check_against_model, count_distinct, piecewise_polynomials
from quadnn_paper.common.machine import torch_threads
from quadnn_paper.engine.optim import make_optimizer
from quadnn_paper.engine.store import cached

__all__ = [
    "STRATEGIES",
    "Strategy",
    "runge",
    "dataset",
    "build_model",
    "init_model",
    "flatten",
    "unflatten_",
    "batched_forward",
    "train_batched",
    "train_reference",
    "experiment_config",
    "experiment",
    "run_experiment",
    "network_checks",
    "piece_analysis",
    "read_piece_analysis",
    "trained_model",
    "rmse",
    "progress_printer",
]


def runge(x):
    """R(x) = 1 / (1 + 16 x^2) (numpy or torch)."""
    return 1.0 / (1.0 + 16.0 * x * x)


@dataclass(frozen=True)
class Strategy:
    init: str  # "relinear" | "random"
    lr: float  # the linear branch (weight, bias)
    lr_g: float  # the gate (weight_g, bias_g)
    lr_b: float  # the power term and constant (weight_b, bias_b)
    shrink: str | None = None  # None | "l1" | "l2" (quadnn.relinear.Shrink after each step)
    alpha: float = 0.0  # alpha (l1) or beta (l2), the same for the g and b terms
    in_paper: bool = True


STRATEGIES = {
    "regular": Strategy("random", 3e-4, 3e-4, 3e-4),
    "relinear-init": Strategy("relinear", 3e-4, 3e-4, 3e-4, in_paper=False),
    "sw-l1": Strategy("relinear", 3e-4, 3e-4, 3e-4, "l1", 1e-4),
    "sw-l2": Strategy("relinear", 3e-4, 3e-4, 3e-4, "l2", 1e-4),
    "sg": Strategy("relinear", 3e-4, 1.5e-4, 1.5e-4),
}

OPTIMIZER = dict(name="Adam", betas=(0.9, 0.999), eps=1e-8)
VERSION = 2  # bump when the training code changes what it computes (invalidates the cache)


def dataset(protocol: dict, dtype=torch.float64):
    """Training and test inputs/targets as ``(N, 1)`` tensors."""
    lo, hi = protocol["interval"]
    x_train = torch.linspace(lo, hi, protocol["n_train"], dtype=dtype)[:, None]
    x_test = torch.linspace(lo, hi, protocol["n_test"], dtype=dtype)[:, None]
    return x_train, runge(x_train), x_test, runge(x_test)


def widths_of(protocol: dict) -> list[int]:
    return [1] + [protocol["width"]] * (protocol["depth"] - 1) + [1]


def build_model(width: int = 8, depth: int = 5, dtype=torch.float64) -> nn.Sequential:
    """``depth`` QuadraticLinear layers of ``width`` neurons (last: 1), ReLU in between."""
    widths = [1] + [width] * (depth - 1) + [1]
    layers: list[nn.Module] = []
    for i, (a, b) in enumerate(zip(widths[:-1], widths[1:])):
        layers.append(QuadraticLinear(a, b, neuron="full", dtype=dtype))
        if i < depth - 1:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


def init_model(strategy: str | Strategy, seed: int, width: int = 8, depth: int = 5) -> nn.Sequential:
    """The starting model of one run (float64)."""
    s = STRATEGIES[strategy] if isinstance(strategy, str) else strategy
    torch.manual_seed(seed)
    model = build_model(width, depth)  # linear branch drawn by torch, quadratic terms ReLinear
    if s.init == "random":
        random_init_(model)
    elif s.init != "relinear":
        raise ValueError(f"init must be 'relinear' or 'random', got {s.init!r}")
    return model


# -- flat parameter layout -------------------------------------------------------------
# Per layer (in -> out): W_rg (in, 2 out) = [weight; weight_g]^T, b_rg (2 out) = [bias, bias_g],
# W_b (in, out) = weight_b^T, c (out) = bias_b.


def _layout(widths):
    off, out = 0, []
    for i, o in zip(widths[:-1], widths[1:]):
        spans = {}
        for key, size in (("Wrg", i * 2 * o), ("brg", 2 * o), ("Wb", i * o), ("c", o)):
            spans[key] = (off, off + size)
            off += size
        out.append((i, o, spans))
    return out, off


def _layers(model):
    return [m for m in model if isinstance(m, QuadraticLinear)]


def flatten(model: nn.Sequential) -> torch.Tensor:
    """The model's parameters as one flat float64 vector in the batched layout."""
    parts = []
    for m in _layers(model):
        parts += [
            torch.cat([m.weight, m.weight_g], 0).T.reshape(-1),
            torch.cat([m.bias, m.bias_g]),
            m.weight_b.T.reshape(-1),
            m.bias_b,
        ]
    return torch.cat([p.detach().to(torch.float64) for p in parts])


@torch.no_grad()
def unflatten_(model: nn.Sequential, flat) -> nn.Sequential:
    """Load a flat vector (from :func:`flatten` or a batched run) into ``model``; returns it."""
    flat = torch.as_tensor(flat, dtype=torch.float64)
    layers = _layers(model)
    widths = [layers[0].in_features] + [m.out_features for m in layers]
    spans, n = _layout(widths)
    if flat.numel() != n:
        raise ValueError(f"flat vector has {flat.numel()} entries, the model needs {n}")
    for m, (i, o, sp) in zip(layers, spans):

        def get(k, sp=sp):
            return flat[sp[k][0] : sp[k][1]]

        wrg = get("Wrg").view(i, 2 * o).T
        m.weight.copy_(wrg[:o])
        m.weight_g.copy_(wrg[o:])
        m.bias.copy_(get("brg")[:o])
        m.bias_g.copy_(get("brg")[o:])
        m.weight_b.copy_(get("Wb").view(i, o).T)
        m.bias_b.copy_(get("c"))
    return model


def _group_masks(widths):
    """Per flat entry: 0 = linear branch, 1 = gate (g), 2 = power term/constant (b); and the reference."""
    spans, n = _layout(widths)
    group = torch.zeros(n, dtype=torch.long)
    ref = torch.zeros(n, dtype=torch.float64)
    for i, o, sp in spans:
        a, _ = sp["Wrg"]
        group[a : a + i * 2 * o].view(i, 2 * o)[:, o:] = 1
        a, _ = sp["brg"]
        group[a + o : a + 2 * o] = 1
        ref[a + o : a + 2 * o] = 1.0  # b_g's ReLinear value
        group[sp["Wb"][0] : sp["Wb"][1]] = 2
        group[sp["c"][0] : sp["c"][1]] = 2
    return group, ref


def _views(P: torch.Tensor, widths) -> list[tuple[torch.Tensor, ...]]:
    """Per layer ``(W_rg, b_rg, W_b, c)`` as views into the flat parameters ``P`` (R, n)."""
    R = P.shape[0]
    out = []
    for i, o, sp in _layout(widths)[0]:

        def view(key, *shape, sp=sp):
            return P[:, sp[key][0] : sp[key][1]].view(R, *shape)

        out.append((view("Wrg", i, 2 * o), view("brg", 1, 2 * o), view("Wb", i, o), view("c", 1, o)))
    return out


def batched_forward(P, x: torch.Tensor, widths=None) -> torch.Tensor:
    """Outputs ``(R, N, 1)`` of R networks at inputs ``x`` (N, 1).

    ``P`` is either the flat parameters (R, n) (then ``widths`` is needed) or their per-layer
    views from :func:`_views`.
    """
    layers = _views(P, widths) if isinstance(P, torch.Tensor) else P
    R = layers[0][0].shape[0]
    h = x.expand(R, *x.shape)
    for k, (Wrg, brg, Wb, c) in enumerate(layers):
        o = Wb.shape[-1]
        z = torch.baddbmm(brg, h, Wrg)
        y = torch.addcmul(torch.baddbmm(c, h * h, Wb), z[..., :o], z[..., o:])
        h = torch.relu(y) if k < len(layers) - 1 else y
    return h


def train_batched(
    runs: list[tuple[str, int]], protocol: dict, log_every: int = 100, threads: int = 1, progress=None
) -> dict:
    """Train every ``(strategy, seed)`` of ``runs`` together: the companion's one training loop
    besides the engine's, for hundreds of 1-d networks as one batched tensor program. Its optimiser
    is torch's Adam arithmetic (:data:`OPTIMIZER`) on one flat tensor with per-element rates: what
    :func:`train_reference`'s :func:`~quadnn_paper.engine.optim.make_optimizer` Adam computes run by
    run (tested). Returns numpy ``params`` (R, n), ``loss`` (R, T: training MSE every ``log_every``
    steps and at the end), ``steps`` and ``seconds``."""
    widths = widths_of(protocol)
    x, y, _, _ = dataset(protocol)
    P0 = torch.stack([flatten(init_model(s, seed, protocol["width"], protocol["depth"])) for s, seed in runs])
    group, ref = _group_masks(widths)
    strat = [STRATEGIES[s] for s, _ in runs]
    lr = torch.stack([torch.tensor([s.lr, s.lr_g, s.lr_b], dtype=torch.float64)[group] for s in strat])
    quad = (group > 0).to(torch.float64)
    l1 = torch.stack([quad * (s.alpha if s.shrink == "l1" else 0.0) for s in strat])
    l2 = torch.stack([quad * (s.alpha if s.shrink == "l2" else 0.0) for s in strat])
    use_l1, use_l2 = bool(l1.any()), bool(l2.any())
    b1, b2 = OPTIMIZER["betas"]
    eps = OPTIMIZER["eps"]

    with warnings.catch_warnings(), torch_threads(threads):
        # the (R, 1, 1) views of the last layer trip torch's gradient-layout notice; harmless here
        warnings.filterwarnings("ignore", message="grad and param do not obey")
        # One flat tensor holds the parameters and one the gradients; the leaves autograd sees
        # are views into the first, and their .grad views into the second, so backward
        # accumulates straight into G and Adam updates everything with a few whole-tensor ops.
        P, G = P0.clone(), torch.zeros_like(P0)
        leaves = _views(P, widths)
        flat_leaves = sum(leaves, ())
        for leaf, grad in zip(flat_leaves, sum(_views(G, widths), ())):
            leaf.requires_grad_(True)
            leaf.grad = grad
        grad_ptrs = [leaf.grad.data_ptr() for leaf in flat_leaves]
        m = torch.zeros_like(P0)
        v = torch.zeros_like(P0)
        losses, steps = [], []
        t0 = time.perf_counter()
        T = protocol["iterations"]
        for t in range(1, T + 1):
            out = batched_forward(leaves, x)
            loss_r = (out - y).square().mean(dim=(1, 2))
            G.zero_()
            loss_r.sum().backward()
            if t == 1:  # autograd must have accumulated into the views of G, not replaced them
                for leaf, ptr in zip(flat_leaves, grad_ptrs):
                    if leaf.grad.data_ptr() != ptr:
                        raise RuntimeError("train_batched: a gradient left the flat buffer")
            with torch.no_grad():
                g = G
                if (t - 1) % log_every == 0:  # loss of the parameters before this step
                    losses.append(loss_r.detach().clone())
                    steps.append(t - 1)
                # torch.optim.Adam (single-tensor form), with per-element learning rates
                m.lerp_(g, 1 - b1)
                v.mul_(b2).addcmul_(g, g, value=1 - b2)
                denom = (v.sqrt() / math.sqrt(1 - b2**t)).add_(eps)
                P.addcdiv_(m * lr, denom, value=-1.0 / (1 - b1**t))
                # quadnn.relinear.Shrink, after the optimiser step
                if use_l1:
                    P.sub_(l1 * torch.sign(P - ref))
                if use_l2:
                    P.sub_(l2 * (P - ref))
            if progress is not None and t % 1000 == 0:
                progress(t, T)
        with torch.no_grad():
            final = (batched_forward(P, x, widths) - y).square().mean(dim=(1, 2))
        losses.append(final)
        steps.append(T)
        seconds = time.perf_counter() - t0
    return dict(params=P.numpy(), loss=torch.stack(losses, 1).numpy(), steps=np.array(steps), seconds=seconds)


def train_reference(strategy: str, seed: int, protocol: dict) -> nn.Sequential:
    """One run the plain way: a torch model, the engine's optimiser builder (``torch.optim.Adam``),
    quadnn's ReLinear tools."""
    s = STRATEGIES[strategy]
    model = init_model(strategy, seed, protocol["width"], protocol["depth"])
    x, y, _, _ = dataset(protocol)
    groups = param_groups(model, s.lr, s.lr_g, s.lr_b)
    opt = make_optimizer(OPTIMIZER["name"], groups, betas=OPTIMIZER["betas"], eps=OPTIMIZER["eps"], foreach=False)
    shrink = Shrink(model, s.shrink, s.alpha, s.alpha) if s.shrink else None
    for _ in range(protocol["iterations"]):
        opt.zero_grad()
        (model(x) - y).square().mean().backward()
        opt.step()
        if shrink is not None:
            shrink.step()
    return model


def rmse(model_or_params, protocol: dict, split: str = "test") -> float:
    """RMSE of a model (or flat parameter vector) on the train or test points."""
    x_tr, y_tr, x_te, y_te = dataset(protocol)
    x, y = (x_te, y_te) if split == "test" else (x_tr, y_tr)
    with torch.no_grad():
        if isinstance(model_or_params, nn.Module):
            out = model_or_params(x)
        else:
            P = torch.as_tensor(np.asarray(model_or_params), dtype=torch.float64)[None]
            out = batched_forward(P, x, widths_of(protocol))[0]
    return float((out - y).square().mean().sqrt())


def progress_printer(every: int = 5000):
    """A ``progress(t, T)`` callback for :func:`run_experiment` that prints every ``every`` iterations."""
    import time

    t0 = time.perf_counter()

    def progress(t: int, total: int) -> None:
        if t % every == 0 or t == total:
            print(f"  iteration {t}/{total}  ({time.perf_counter() - t0:.0f} s)", flush=True)

    return progress


def experiment_config(protocol: dict, strategies=None) -> dict:
    """The configuration :func:`experiment` takes and the cache keys ``runge`` on."""
    strategies = list(strategies or STRATEGIES)
    return dict(
        protocol=protocol,
        strategies={s: STRATEGIES[s].__dict__ for s in strategies},
        optimizer=OPTIMIZER,
        version=VERSION,
    )


def _as_json(value):
    return json.loads(json.dumps(value))


def experiment(protocol: dict, strategies: dict, optimizer: dict, version: int, progress=None) -> dict:
    """All strategies (by name) x seeds of ``protocol`` trained together (:func:`train_batched`);
    JSON-friendly result. The configuration must be what this code computes
    (:func:`experiment_config`): a cached result is keyed by it.

    ``result["runs"]``: one dict per run with strategy, seed, test and train RMSE, the final
    flat parameters and the loss curve; ``result["seconds"]``: the training wall time.
    """
    asked = _as_json(dict(strategies=strategies, optimizer=optimizer, version=version))
    code = _as_json({k: v for k, v in experiment_config(protocol, list(strategies)).items() if k != "protocol"})
    if asked != code:
        raise ValueError(f"runge.experiment: the configuration {asked} is not what this code trains ({code})")
    runs = [(s, seed) for s in strategies for seed in protocol["seeds"]]
    out = train_batched(runs, protocol, progress=progress or progress_printer(every=5000))
    rows = []
    for k, (s, seed) in enumerate(runs):
        p = out["params"][k]
        rows.append(
            dict(
                strategy=s,
                seed=seed,
                rmse=rmse(p, protocol, "test"),
                train_rmse=rmse(p, protocol, "train"),
                params=p.tolist(),
                loss=out["loss"][k].tolist(),
            )
        )
    return dict(runs=rows, steps=out["steps"].tolist(), seconds=out["seconds"], threads=1, torch=torch.__version__)


def run_experiment(protocol: dict, cache_dir=None, strategies=None, progress=None) -> dict:
    """:func:`experiment` for ``protocol``, cached by configuration (the section's ``runge`` computation)."""
    config = experiment_config(protocol, strategies)
    return cached(cache_dir, "runge", config, lambda: experiment(**config, progress=progress))


def network_checks(
    interval, n_train: int, n_test: int, width: int, depth: int, probe_strategy: str, probe_seed: int
) -> dict:
    """The data set and the network (deterministic), and the self-check of
    :func:`~quadnn_paper.analysis.piecewise.piecewise_polynomials` on the starting network of
    ``probe_strategy`` at ``probe_seed``: its pieces against the network at 2,000 points and near
    every breakpoint."""
    P = dict(interval=interval, n_train=n_train, n_test=n_test)
    x_train, _, x_test, _ = dataset(P)
    net = build_model(width, depth)
    probe = init_model(probe_strategy, probe_seed, width, depth)
    pieces = piecewise_polynomials(probe, *interval)
    check = check_against_model(probe, pieces)
    return dict(
        train_points=len(x_train),
        test_points=len(x_test),
        shared_points=int(np.isin(x_test.numpy(), x_train.numpy()).sum()),
        layers=[[m.in_features, m.out_features] for m in _layers(net)],
        parameters=sum(p.numel() for p in net.parameters()),
        probe_pieces=len(pieces),
        probe_coefficients=len(pieces[0][2]),
        probe_max_rel_error=float(check["max_rel_error"]),
        probe_max_rel_jump=float(check["max_rel_jump"]),
    )


def _high_order(pieces, k0: int = 3) -> float:
    """Largest |c_k|, k >= k0, over the pieces of one network (how wild its polynomials are)."""
    return max(float(np.abs(c[k0:]).max()) for _, _, c in pieces)


def trained_model(run: dict, P: dict) -> nn.Sequential:
    """The network of one run of :func:`run_experiment`, its final parameters loaded."""
    return unflatten_(build_model(P["width"], P["depth"]), run["params"])


def piece_analysis(interval: list, width: int, depth: int, runge: dict) -> dict:
    """:func:`_piece_statistics` of the networks ``runge`` (:func:`experiment`'s result) trained, as
    JSON: per strategy each network's pieces ``[start, end, coefficients]`` and their counts."""
    by = {s: [r for r in runge["runs"] if r["strategy"] == s] for s in STRATEGIES}
    models = {s: [trained_model(r, dict(width=width, depth=depth)) for r in rs] for s, rs in by.items()}
    shape = _piece_statistics(models, *interval)
    as_lists = lambda d: {s: v.tolist() for s, v in d.items()}  # noqa: E731
    return dict(
        pieces={s: [[[a, b, c.tolist()] for a, b, c in p] for p in ps] for s, ps in shape["pieces"].items()},
        worst_piece_error=shape["worst_piece_error"],
        n_pieces=as_lists(shape["n_pieces"]),
        n_distinct=as_lists(shape["n_distinct"]),
        high=as_lists(shape["high"]),
    )


def read_piece_analysis(analysis: dict) -> dict:
    """:func:`piece_analysis`'s JSON back as :func:`_piece_statistics` returns it."""
    return dict(
        pieces={s: [[(a, b, np.array(c)) for a, b, c in p] for p in ps] for s, ps in analysis["pieces"].items()},
        worst_piece_error=analysis["worst_piece_error"],
        **{k: {s: np.array(v) for s, v in analysis[k].items()} for k in ("n_pieces", "n_distinct", "high")},
    )


def _piece_statistics(models: dict, lo: float, hi: float) -> dict:
    """Per strategy the exact polynomial pieces of every network on ``[lo, hi]``, how many there are
    (as found, and with equal neighbours merged) and how wild they are; and the worst relative
    error of the pieces against the networks (the check that the pieces are the networks)."""
    pieces = {s: [piecewise_polynomials(m, lo, hi) for m in ms] for s, ms in models.items()}
    worst = max(
        check_against_model(m, p, n=1001)["max_rel_error"] for s in STRATEGIES for m, p in zip(models[s], pieces[s])
    )
    return dict(
        pieces=pieces,
        worst_piece_error=worst,
        n_pieces={s: np.array([len(p) for p in ps]) for s, ps in pieces.items()},
        n_distinct={s: np.array([count_distinct(p) for p in ps]) for s, ps in pieces.items()},
        high={s: np.array([_high_order(p) for p in ps]) for s, ps in pieces.items()},
    )
