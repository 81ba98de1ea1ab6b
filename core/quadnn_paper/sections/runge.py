"""The Runge experiment: a quadratic ReLU network fits R(x) = 1/(1+16x^2) from 33 points.

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

The section declares its work (:func:`work`): the batched training of every strategy and seed
(:func:`experiment`, cached as ``runge``) and the checks of the data set, the network and the
piecewise decomposition (:func:`network_checks`); :func:`outputs` turns their results into the
tables, figures and quoted numbers.
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
from quadnn_paper.analysis import stats
from quadnn_paper.analysis.piecewise import check_against_model, count_distinct, piecewise_polynomials
from quadnn_paper.common import published
from quadnn_paper.common.cells import Cell
from quadnn_paper.common.machine import torch_threads
from quadnn_paper.common.outputs import Figure, Lines, Table, Variables
from quadnn_paper.common.profiles import protocol_of
from quadnn_paper.engine import Computation
from quadnn_paper.engine.optim import make_optimizer
from quadnn_paper.engine.store import cached

__all__ = [
    "PAPER",
    "PAPER_RMSE",
    "PROTOCOLS",
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
    "rmse",
    "NAME",
    "protocol",
    "data",
    "work",
    "outputs",
    "summary",
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

# The paper's protocol (Section "Runge Function Approximation") and its reported RMSEs.
PAPER = published.RUNGE
PAPER_RMSE = published.RUNGE_RMSE
PAPER_PIECES = published.RUNGE_PIECES

# smoke: seconds (same network and data, 300 iterations). cpu: the paper's full protocol with
# five seeds. full: the paper's protocol with eight seeds. All runs of a profile train together
# (about 1.5 to 6 minutes on two shared cores, depending on the load).
PROTOCOLS = {
    "smoke": dict(PAPER, iterations=300, seeds=[0, 1]),
    "cpu": dict(PAPER, seeds=list(range(5))),
    "full": dict(PAPER, seeds=list(range(8))),
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


# -- the section interface ----------------------------------------------------------------------
NAME = "runge"
# What the report calls each strategy, in text and in macro names (its LaTeX: quadnn_paper.latex.runge).
LABEL = {
    "regular": "regular",
    "relinear-init": "ReLinear init only",
    "sw-l1": "ReLinear-sw-l1",
    "sw-l2": "ReLinear-sw-l2",
    "sg": "ReLinear-sg",
}
COLOR = {
    "regular": "tab:red",
    "relinear-init": "tab:gray",
    "sw-l1": "tab:blue",
    "sw-l2": "tab:green",
    "sg": "tab:purple",
}
MACRO = {"regular": "Regular", "relinear-init": "Init", "sw-l1": "SwLOne", "sw-l2": "SwLTwo", "sg": "Sg"}
BLOWN = 1.0  # test RMSE above 1 on a target within [0, 1]: the fit blew up
PAPER_ORDER = ("sg", "sw-l2", "sw-l1")  # the paper's ranking of the ReLinear strategies, best first
PROBE = ("regular", 0)  # the network the piecewise self-check takes apart: regular init, seed 0
PIECE_TOLERANCE = 1e-10  # the self-check passes when the pieces agree with the network to this relative error
# Training cost: seconds per run and iteration of the batched trainer (cpu: 25 runs x 30,000
# iterations in 112 s on two shared cores), and at least the smoke profile's few seconds.
SECONDS_PER_RUN_ITERATION = 1.5e-4
MIN_SECONDS = 5.0
RMSE_HEADER = ["strategy", "RMSE mean", "RMSE median", "blew up", "paper"]
PIECES_HEADER = ["strategy", "pieces mean", "range", "max |c_k|, k>=3 (median)"]


def protocol(profile: str, tiny: bool = False) -> dict:
    """A copy of the protocol of ``profile``; TINY=1 caps the iterations (the code path, not a measurement)."""
    return protocol_of(PROTOCOLS, profile, tiny, caps=lambda P: dict(P, iterations=min(P["iterations"], 300)))


def data(profile: str, tiny: bool = False) -> str:
    """The data the section's numbers come from, in words."""
    P = protocol(profile, tiny)
    return f"Runge function, {P['n_train']} points" + (f", TINY=1: {P['iterations']} iterations" if tiny else "")


def _experiment(profile: str, tiny: bool) -> Computation:
    """The batched training of every strategy and seed (the cache entry ``runge``)."""
    P = protocol(profile, tiny)
    seconds = round(max(MIN_SECONDS, SECONDS_PER_RUN_ITERATION * len(STRATEGIES) * len(P["seeds"]) * P["iterations"]))
    return Computation("runge", f"{__name__}:experiment", experiment_config(P), seconds=seconds)


def _checks(profile: str, tiny: bool) -> Computation:
    """The checks of the data set, the network and the piecewise decomposition."""
    P = protocol(profile, tiny)
    config = {k: P[k] for k in ("interval", "n_train", "n_test", "width", "depth")}
    config.update(probe_strategy=PROBE[0], probe_seed=PROBE[1])
    return Computation("runge_checks", f"{__name__}:network_checks", config, seconds=2)


def _pieces(profile: str, tiny: bool) -> Computation:
    """The exact polynomial pieces of every trained network (reads the training's result)."""
    P = protocol(profile, tiny)
    config = {k: P[k] for k in ("interval", "width", "depth")}
    seconds = max(2, round(0.05 * len(STRATEGIES) * len(P["seeds"])))
    return Computation(
        "runge_pieces", f"{__name__}:piece_analysis", config, seconds, needs=(_experiment(profile, tiny),)
    )


def work(profile: str, tiny: bool = False) -> list:
    """The section's work: the checks of its data and network, the training of all its runs, and
    the trained networks taken apart into their polynomial pieces."""
    return [_checks(profile, tiny), _experiment(profile, tiny), _pieces(profile, tiny)]


def _high_order(pieces, k0: int = 3) -> float:
    """Largest |c_k|, k >= k0, over the pieces of one network (how wild its polynomials are)."""
    return max(float(np.abs(c[k0:]).max()) for _, _, c in pieces)


def _strategy_cell(s: str) -> Cell:
    """The strategy's label, as the tables' first column shows it (its LaTeX from quadnn_paper.latex)."""
    return Cell(LABEL[s])


def _blown(v: np.ndarray) -> int:
    """How many fits blew up (test RMSE above :data:`BLOWN`)."""
    return int((v > BLOWN).sum())


def _rmse_cell(v: np.ndarray, paper: float | None) -> Cell:
    """Mean and std of the test RMSEs ``v``, judged against the paper's RMSE (None: not in the paper)."""
    # flagged only when ours is worse than the paper's by more than 2 std; a better fit is not a
    # failure to reproduce, and says so in a note
    better = paper is not None and v.mean() < paper - 2 * v.std()
    return Cell(
        float(v.mean()),
        float(v.std()),
        reproduced=None if paper is None or better else bool(v.mean() - paper <= 2 * v.std()),
        note="(better than the paper)" if better else "",
    )


def _rmse_row(s: str, v: np.ndarray) -> list:
    """A row of the RMSE table: strategy, mean +- std, median, blown fits, the paper's RMSE."""
    paper = PAPER_RMSE[s]
    return [_strategy_cell(s), _rmse_cell(v, paper), float(np.median(v)), f"{_blown(v)}/{len(v)}", paper]


def _piece_row(s: str, n_pieces: np.ndarray, high: np.ndarray) -> list:
    """A row of the pieces table: strategy, pieces mean +- std, their range, median largest |c_k|."""
    return [
        _strategy_cell(s),
        Cell(float(n_pieces.mean()), float(n_pieces.std()), decimals=1),
        f"{n_pieces.min()}--{n_pieces.max()}",
        float(np.median(high)),
    ]


def _trained_model(run: dict, P: dict) -> nn.Sequential:
    """The network of one run of :func:`run_experiment`, its final parameters loaded."""
    return unflatten_(build_model(P["width"], P["depth"]), run["params"])


def piece_analysis(interval: list, width: int, depth: int, runge: dict) -> dict:
    """:func:`_piece_statistics` of the networks ``runge`` (:func:`experiment`'s result) trained, as
    JSON: per strategy each network's pieces ``[start, end, coefficients]`` and their counts."""
    by = {s: [r for r in runge["runs"] if r["strategy"] == s] for s in STRATEGIES}
    models = {s: [_trained_model(r, dict(width=width, depth=depth)) for r in rs] for s, rs in by.items()}
    shape = _piece_statistics(models, *interval)
    as_lists = lambda d: {s: v.tolist() for s, v in d.items()}  # noqa: E731
    return dict(
        pieces={s: [[[a, b, c.tolist()] for a, b, c in p] for p in ps] for s, ps in shape["pieces"].items()},
        worst_piece_error=shape["worst_piece_error"],
        n_pieces=as_lists(shape["n_pieces"]),
        n_distinct=as_lists(shape["n_distinct"]),
        high=as_lists(shape["high"]),
    )


def _shape(analysis: dict) -> dict:
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


# The per-strategy numbers the text quotes, and of which strategies (tools/paper_check.py fails a
# build that writes one nobody reads; the tables carry the rest).
_QUOTED = {
    "Rmse": ("relinear-init", "sg"),
    "RmseMedian": ("regular", "sw-l1", "sw-l2", "sg"),
    "Blown": ("regular",),
    "Pieces": ("sw-l1", "sw-l2", "sg"),
    "PiecesMin": ("sg",),
    "PiecesMax": ("sg",),
    "High": tuple(STRATEGIES),
}


def _strategy_variables(rmse_: dict, n_pieces: dict, high: dict) -> dict:
    """Per strategy the RMSE, pieces and coefficient numbers the text quotes (:data:`_QUOTED`)."""
    numbers = {
        "Rmse": lambda s: float(rmse_[s].mean()),
        "RmseMedian": lambda s: float(np.median(rmse_[s])),
        "Blown": lambda s: _blown(rmse_[s]),
        "Pieces": lambda s: (float(n_pieces[s].mean()), 3),
        "PiecesMin": lambda s: int(n_pieces[s].min()),
        "PiecesMax": lambda s: int(n_pieces[s].max()),
        "High": lambda s: (float(np.median(high[s])), 2),
    }
    return {f"{k}{MACRO[s]}": numbers[k](s) for k, strategies in _QUOTED.items() for s in strategies}


def _ranking_verdict(rmse_: dict) -> str:
    """Whether our RMSEs rank the ReLinear strategies as the paper does, in words."""
    # The ranking is decided from paired intervals (the seeds share the linear branch), by the
    # report's one verdict rule; no equivalence margin applies to an RMSE (margin 0).
    steps = [
        stats.verdict(stats.interval(list(rmse_[b] - rmse_[a])), margin=0.0)
        for a, b in zip(PAPER_ORDER, PAPER_ORDER[1:])
    ]
    if all(v == stats.SUPPORTED for v in steps):
        return "yes, each step decided by its paired interval"
    if stats.CONTRADICTED in steps:
        return "no: at least one step is reversed beyond its paired interval"
    return "not decided: the paired intervals of the steps include zero"


def _ranking_variables(order: list[str], rmse_: dict) -> dict:
    """Our ranking of the ReLinear strategies (``order``, best first) against the paper's, and how
    often sg beats the others."""
    var = dict(
        OrderFirst=LABEL[order[0]],
        OrderSecond=LABEL[order[1]],
        OrderThird=LABEL[order[2]],
        OrderMatches=_ranking_verdict(rmse_),
        SgBest="yes" if order[0] == "sg" else "no",
    )
    # the seeds share the linear branch across strategies, so they compare seed by seed
    for other in ("sw-l1", "sw-l2", "relinear-init"):
        var[f"SgBeats{MACRO[other]}"] = int((rmse_["sg"] < rmse_[other]).sum())
    return var


def _paper_rmse_variables(rmse_: dict) -> dict:
    """Per ReLinear strategy of the paper: its RMSE over ours, and whether ours reproduces it."""
    var = {}
    for s in PAPER_ORDER:
        var[f"Ratio{MACRO[s]}"] = (float(PAPER_RMSE[s] / rmse_[s].mean()), 2)
        d = rmse_[s].mean() - PAPER_RMSE[s]
        var[f"Reproduced{MACRO[s]}"] = "yes" if abs(d) <= 2 * rmse_[s].std() else ("better" if d < 0 else "no")
    return var


def _gap_and_spread(rmse_: dict) -> tuple[float, float]:
    """The range of the ReLinear strategies' mean RMSEs, and their largest std."""
    gap = max(rmse_[s].mean() for s in PAPER_ORDER) - min(rmse_[s].mean() for s in PAPER_ORDER)
    spread = max(rmse_[s].std() for s in PAPER_ORDER)
    return gap, spread


def summary(results: dict, pieces: dict, profile: str, tiny: bool = False) -> dict:
    """The section's numbers from :func:`run_experiment`'s ``results`` and :func:`piece_analysis`'s
    ``pieces``: per strategy the test RMSEs, the trained networks and their exact polynomial pieces;
    the RMSE and pieces tables (rows of :class:`~quadnn_paper.common.cells.Cell`); and the variables
    the text quotes."""
    P = protocol(profile, tiny)
    by = {s: [r for r in results["runs"] if r["strategy"] == s] for s in STRATEGIES}
    models = {s: [_trained_model(r, P) for r in rs] for s, rs in by.items()}
    rmse_ = {s: np.array([r["rmse"] for r in rs]) for s, rs in by.items()}
    shape = _shape(pieces)
    order = sorted(PAPER_ORDER, key=lambda s: rmse_[s].mean())
    gap, spread = _gap_and_spread(rmse_)
    variables = dict(
        Seeds=len(P["seeds"]),
        Iterations=P["iterations"],
        BlownRmse=BLOWN,
        TrainSeconds=round(results["seconds"]),
        PaperPieces=PAPER_PIECES,
        WorstPieceError=(shape["worst_piece_error"], 1),
        **_strategy_variables(rmse_, shape["n_pieces"], shape["high"]),
        **_ranking_variables(order, rmse_),
        **_paper_rmse_variables(rmse_),
        GapWithinSpread="yes" if gap < spread else "no",
    )
    return dict(
        protocol=P,
        runs=by,
        models=models,
        rmse=rmse_,
        **shape,  # pieces, worst_piece_error, n_pieces, n_distinct, high
        order=order,
        gap=gap,
        spread=spread,
        rmse_rows=[_rmse_row(s, rmse_[s]) for s in STRATEGIES],
        piece_rows=[_piece_row(s, shape["n_pieces"][s], shape["high"][s]) for s in STRATEGIES],
        variables=variables,
    )


# -- the outputs ---------------------------------------------------------------------------------
def _check_lines(checks: dict, P: dict) -> list[Lines]:
    """What the checks of the data set, the network and the piecewise decomposition print."""
    lo, hi = P["interval"]
    layers = [tuple(layer) for layer in checks["layers"]]
    passed = checks["probe_max_rel_error"] < PIECE_TOLERANCE and checks["probe_max_rel_jump"] < PIECE_TOLERANCE
    network = [
        f"train points: {checks['train_points']} on [{lo:g}, {hi:g}], test points: {checks['test_points']}",
        f"test points that are also training points: {checks['shared_points']}",
        f"layers: {layers}",
        f"parameters per network: {checks['parameters']}; degree of each piece <= {2 ** P['depth']}",
    ]
    probe = (
        f"piecewise self-check: {'pass' if passed else 'FAIL'}; {checks['probe_pieces']} pieces, "
        f"{checks['probe_coefficients']} coefficients each"
    )
    return [Lines(network, check=True), Lines([probe], check=True)]


def _result_lines(result: dict, S: dict) -> list[str]:
    """Per strategy the test RMSEs of its seeds, the pieces of its networks and their largest coefficients."""
    lines = [f"{len(result['runs'])} runs; training took {result['seconds']:.0f} s when computed"]
    lines += [f"{LABEL[s]:>20}: RMSE " + " ".join(f"{v:.3g}" for v in S["rmse"][s]) for s in STRATEGIES]
    lines.append(f"worst relative error of the pieces against the networks: {S['worst_piece_error']:.2g}")
    lines += [
        f"{LABEL[s]:>20}: pieces {S['n_pieces'][s].tolist()} (after merging equal neighbours "
        f"{S['n_distinct'][s].tolist()}); max |c_k| (k>=3) median {np.median(S['high'][s]):.3g}"
        for s in STRATEGIES
    ]
    return lines


def _fits_figure(S: dict):
    """Top: every seed's fit per strategy beside R(x); bottom: the coefficients of every piece of
    the median-RMSE network per strategy."""
    import matplotlib.pyplot as plt

    P = S["protocol"]
    lo, hi = P["interval"]
    seeds = P["seeds"]
    x_train, y_train, _, _ = dataset(P)
    xf = np.linspace(lo, hi, 1001)
    xt = torch.as_tensor(xf)[:, None]
    fig, axes = plt.subplots(2, len(STRATEGIES), figsize=(7.2, 3.3), sharey="row")  # printed size: full width
    for j, s in enumerate(STRATEGIES):
        rmse_ = S["rmse"][s]
        ax = axes[0, j]
        # dashed: the target is told from the fits by its dash, not by a shade (a strategy's colour may be grey)
        ax.plot(xf, runge(xf), color="k", lw=1.0, ls="--", label="R(x)")
        for k, m in enumerate(S["models"][s]):
            with torch.no_grad():
                ax.plot(xf, m(xt).numpy()[:, 0], color=COLOR[s], lw=0.7, alpha=0.55, label="fits" if k == 0 else None)
        ax.plot(x_train.numpy(), y_train.numpy(), "o", ms=1.8, color="k", label="train")
        ax.set_ylim(-0.35, 1.35)
        ax.set_xlim(lo, hi)
        ax.set_title(LABEL[s], fontsize=7)
        ax.set_xticks([-5, 0, 5])
        ax.set_xlabel("x", fontsize=6.5)
        note = f"RMSE med {np.median(rmse_):.3g}\n{_blown(rmse_)}/{len(seeds)} blew up"
        ax.text(0.03, 0.97, note, transform=ax.transAxes, fontsize=6.5, va="top")
        ax.tick_params(labelsize=6.5)
        # coefficients: the median-RMSE seed
        k_med = int(np.argsort(rmse_)[len(seeds) // 2])
        ax = axes[1, j]
        ps = S["pieces"][s][k_med]
        cmap = plt.get_cmap("viridis")
        for i, (_, _, c) in enumerate(ps):
            deg = np.arange(len(c))
            nz = np.abs(c) > 0
            ax.semilogy(deg[nz], np.abs(c[nz]), "-", lw=0.6, color=cmap(i / max(len(ps) - 1, 1)), marker=".", ms=1.5)
        ax.set_xlabel("degree k", fontsize=6.5)
        ax.tick_params(labelsize=6.5)
        ax.set_title(f"{len(ps)} pieces (seed {seeds[k_med]})", fontsize=6.5)
    # Beside the last panel: inside, every spot holds a fit or the panel's RMSE note at some profile.
    axes[0, -1].legend(fontsize=6.5, loc="upper left", bbox_to_anchor=(1.03, 1), borderaxespad=0, frameon=False)
    axes[0, 0].set_ylabel("R(x), fits", fontsize=6.5)
    axes[1, 0].set_ylabel("|c_k| (powers of x)", fontsize=6.5)
    fig.tight_layout(h_pad=0.6, w_pad=0.3)
    return fig


def _loss_figure(S: dict, steps: list[int]):
    """The median training MSE over seeds per strategy against the iterations."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(3.4, 2.6))  # printed size: one column
    for s in STRATEGIES:
        L = np.array([r["loss"] for r in S["runs"][s]])
        ax.loglog(np.maximum(np.array(steps), 1), np.median(L, 0), color=COLOR[s], lw=1, label=LABEL[s])
    ax.set_xlabel("iteration", fontsize=7)
    ax.set_ylabel("training MSE (median)", fontsize=7)
    ax.tick_params(labelsize=6.5)
    # below the axes: the curves of five strategies leave no corner free at every profile
    ax.legend(fontsize=6.5, frameon=False, loc="upper center", bbox_to_anchor=(0.5, -0.3), ncol=3)
    fig.tight_layout()
    return fig


def _pending_figure(figsize: tuple[float, float]):
    """A figure that says the training is pending on its runner."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=figsize)
    ax.text(0.5, 0.5, "pending", transform=ax.transAxes, ha="center", va="center")
    ax.axis("off")
    return fig


# The quoted numbers that need the trained networks: per strategy (with its MACRO), and overall.
_RANKING_VARIABLES = (
    ("OrderFirst", "OrderSecond", "OrderThird", "OrderMatches", "SgBest")
    + tuple(f"SgBeats{MACRO[s]}" for s in ("sw-l1", "sw-l2", "relinear-init"))
    + tuple(f"{k}{MACRO[s]}" for s in PAPER_ORDER for k in ("Ratio", "Reproduced"))
    + ("GapWithinSpread",)
)


def pending_variables(P: dict) -> dict:
    """The section's variables, named and ordered as :func:`summary` gives them, while its
    training is pending: the protocol's numbers, "pending" for the rest."""
    per_strategy = [f"{k}{MACRO[s]}" for k, strategies in _QUOTED.items() for s in strategies]
    return dict(
        Seeds=len(P["seeds"]),
        Iterations=P["iterations"],
        BlownRmse=BLOWN,
        TrainSeconds="pending",
        PaperPieces=PAPER_PIECES,
        WorstPieceError="pending",
        **dict.fromkeys([*per_strategy, *_RANKING_VARIABLES], "pending"),
    )


def _pending_outputs(P: dict) -> list:
    """The tables, figures and variables while the training is pending on a runner."""
    runs = len(STRATEGIES) * len(P["seeds"])
    return [
        Lines([f"training pending: {runs} runs ({len(STRATEGIES)} strategies x {len(P['seeds'])} seeds)"]),
        Table("runge_rmse", RMSE_HEADER, [[_strategy_cell(s), *["pending"] * 3, PAPER_RMSE[s]] for s in STRATEGIES]),
        Variables(pending_variables(P)),
        Figure("runge_fits", lambda: _pending_figure((7.2, 3.3))),
        Figure("runge_loss", lambda: _pending_figure((3.4, 2.6))),
        Table("runge_pieces", PIECES_HEADER, [[_strategy_cell(s), *["pending"] * 3] for s in STRATEGIES]),
    ]


def outputs(results: dict, profile: str, tiny: bool = False) -> list:
    """The section's tables, figures, variables and printed lines from its work's ``results``."""
    P = protocol(profile, tiny)
    shown = {k: v for k, v in P.items() if k != "seeds"}
    head = [Lines([f"{profile} {shown} seeds: {P['seeds']}"]), *_check_lines(results[_checks(profile, tiny).key], P)]
    result = results[_experiment(profile, tiny).key]
    if result is None:
        return head + _pending_outputs(P)
    S = summary(result, results[_pieces(profile, tiny).key], profile, tiny)
    order = f"our order: {S['order']} | paper: {list(PAPER_ORDER)} | gap {round(S['gap'], 4)} largest std {round(S['spread'], 4)}"
    return head + [
        Lines(_result_lines(result, S)),
        Table("runge_rmse", RMSE_HEADER, S["rmse_rows"], digits=3),
        Variables(S["variables"]),
        Lines([order]),
        Figure("runge_fits", lambda: _fits_figure(S)),
        Figure("runge_loss", lambda: _loss_figure(S, result["steps"])),
        Table("runge_pieces", PIECES_HEADER, S["piece_rows"], digits=2),
    ]
