"""What the model families share: their block convolution, the official code's initialisation, the
backward-memory plan of their quadratic layers, and timm's configurations, classifier and feature
interface."""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from timm.layers import DropPath, create_classifier
from timm.models import generate_default_cfgs, register_notrace_module
from timm.models._features import feature_take_indices
from torch import nn
from torch.utils.checkpoint import checkpoint

from ..layers import NEURONS, QuadraticConv2d, QuadraticLayer
from ..recompute import plan_recompute

# timm's fx feature extraction (and its generic fx tests) keep the quadratic layers as leaf modules,
# so a traced model calls the very same layer (custom autograd Function included).
register_notrace_module(QuadraticLayer)

POOLS = ("avg", "max", "avgmax", "catavgmax", "")
KINDS = ("conventional",) + NEURONS


def conv3x3(cin: int, cout: int, stride: int = 1, neuron: str = "conventional", **dd) -> nn.Module:
    """A 3x3 convolution followed by batch norm. A conventional one drops its bias (the batch norm's
    shift replaces it). A quadratic one keeps ``b_r`` and ``c``, as the paper's neuron and the
    official QResNets do: ``c`` is absorbed by the batch norm too, but ``b_r`` is not (it
    contributes ``b_r * W_g x``)."""
    if neuron == "conventional":
        return nn.Conv2d(cin, cout, 3, stride, 1, bias=False, **dd)
    return QuadraticConv2d(cin, cout, 3, stride, 1, bias=True, neuron=neuron, **dd)


def untrained_cfgs(variants, **cfg):
    """timm's ``default_cfgs``: one ``<variant>.untrained`` (no weights to download) per variant,
    the fields the families share updated with ``cfg``."""
    shared = dict(url="", crop_pct=1.0, interpolation="bilinear", first_conv="conv1", classifier="fc", license="mit")
    return generate_default_cfgs({f"{name}.untrained": {**shared, **cfg} for name in variants})


class ConvClassifier(nn.Module):
    """Base of the CIFAR ResNet, CIFAR VGG and ImageNet ResNet families.

    Subclasses build their body, call :meth:`_init_head` for ``self.global_pool``/``self.fc``,
    implement :meth:`_feature_stages` (one callable per ``feature_info`` entry), and call
    :meth:`reset_parameters` at the end of ``__init__``.
    """

    fc: nn.Module
    global_pool: nn.Module
    num_features: int
    drop_rate: float
    zero_init_last: bool = False
    grad_checkpointing: bool = False
    # timm's group_matcher: the stem's parameters, and one group per block (coarse: per stage)
    _group_stem = r"^conv1|^bn1"
    _group_blocks = (r"^layer(\d+)", r"^layer(\d+)\.(\d+)")  # (coarse, fine)

    @staticmethod
    def _check_kind(neuron: str, width: float) -> None:
        if neuron not in KINDS:
            raise ValueError(f"neuron must be one of {KINDS}, got {neuron!r}")
        if not width > 0:
            raise ValueError(f"width must be positive, got {width!r}")

    def _init_head(
        self, num_features: int, num_classes: int, global_pool: str, drop_rate: float, device=None, dtype=None
    ) -> None:
        if global_pool not in POOLS:
            raise ValueError(f"global_pool must be one of {POOLS}, got {global_pool!r}")
        self.num_classes, self.drop_rate = num_classes, drop_rate
        self.num_features = self.head_hidden_size = num_features
        self.global_pool, self.fc = create_classifier(
            num_features, num_classes, pool_type=global_pool, device=device, dtype=dtype
        )

    @staticmethod
    def drop_paths(rate: float, blocks: int, has_residual: bool = True) -> list[nn.Module]:
        """timm's stochastic depth: one ``DropPath`` per residual block, its rate rising linearly
        from 0 at the first block to ``rate`` at the last (``nn.Identity`` where it is 0)."""
        if not 0 <= rate < 1:
            raise ValueError(f"drop_path_rate must be in [0, 1), got {rate!r}")
        if rate and not has_residual:
            raise ValueError(
                f"drop_path_rate={rate!r}: this network has no residual branch to drop "
                "(stochastic depth needs shortcuts); use drop_path_rate=0"
            )
        rates = [rate * i / max(1, blocks - 1) for i in range(blocks)]
        return [DropPath(r) if r else nn.Identity() for r in rates]

    def set_norm_args_(self, bn_momentum: float | None = None, bn_eps: float | None = None) -> None:
        """timm's ``bn_momentum``/``bn_eps`` (train.py's ``--bn-momentum``/``--bn-eps``) on every
        batch norm; None keeps torch's default."""
        for m in self.modules():
            if isinstance(m, nn.modules.batchnorm._BatchNorm):
                if bn_momentum is not None:
                    m.momentum = bn_momentum
                if bn_eps is not None:
                    m.eps = bn_eps

    def plan_recompute_(self, budget: float | None, in_chans: int, size: int, device=None, dtype=None) -> None:
        """Choose what each quadratic layer keeps for backward (:func:`quadnn.plan_recompute`).

        ``budget`` is the average number of extra output-sized tensors a quadratic layer may
        keep (None: leave every layer at its own default; ``timm.create_model`` drops None
        arguments, so pass None to the class itself). The plan depends only on relative
        activation sizes, so one probe image of ``size`` x ``size`` is enough.
        """
        if budget is not None:
            plan_recompute(self, torch.zeros(1, in_chans, size, size, device=device, dtype=dtype), budget=budget)

    @torch.no_grad()
    def reset_parameters(self) -> None:
        # As the official ReLinear code: Kaiming-normal convolutions in fan_in mode (the linear
        # branch W_r of quadratic ones; b_r keeps torch's default, as there), BN at (1, 0), the
        # classifier as torch initialises it. Quadratic terms keep the ReLinear values their layers
        # set. zero_init_last (timm's ResNets; not the paper's recipe, which passes False) starts
        # the last batch norm of every residual block at gamma = 0, so each block starts as the
        # identity and a deep network's output stays finite at initialisation.
        for m in self.modules():
            if isinstance(m, (nn.Conv1d, nn.Conv2d, nn.Conv3d)):
                nn.init.kaiming_normal_(m.weight, mode="fan_in", nonlinearity="relu")
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)
        if self.zero_init_last:
            for m in self.modules():
                if callable(getattr(m, "zero_init_last", None)):  # the blocks' method
                    m.zero_init_last()

    # -- timm interface -----------------------------------------------------------------
    @torch.jit.ignore
    def group_matcher(self, coarse: bool = False) -> dict:
        """Parameter groups by name (timm's layer-wise learning-rate decay, ``--layer-decay``):
        the stem, then one group per block, or per stage when ``coarse``; the classifier last."""
        return dict(stem=self._group_stem, blocks=self._group_blocks[0 if coarse else 1])

    @torch.jit.ignore
    def set_grad_checkpointing(self, enable: bool = True) -> None:
        """timm's gradient checkpointing (train.py's ``--grad-checkpointing``): each feature stage
        keeps only its input for backward and runs again during it."""
        self.grad_checkpointing = enable

    def get_classifier(self) -> nn.Module:
        return self.fc

    def reset_classifier(self, num_classes: int, global_pool: str | None = None) -> None:
        """New classifier for ``num_classes`` (0: none); ``global_pool=''`` also drops the pooling,
        so the model returns the unpooled feature map."""
        if global_pool is None:
            global_pool = self.global_pool.pool_type
        p = self.fc.weight if isinstance(self.fc, nn.Linear) else next(self.parameters())
        self._init_head(self.num_features, num_classes, global_pool, self.drop_rate, device=p.device, dtype=p.dtype)

    def forward_head(self, x: torch.Tensor, pre_logits: bool = False) -> torch.Tensor:
        x = self.global_pool(x)
        if self.drop_rate:
            x = F.dropout(x, self.drop_rate, self.training)
        return x if pre_logits else self.fc(x)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.forward_head(self.forward_features(x))

    def _feature_stages(self) -> list[Callable[[torch.Tensor], torch.Tensor]]:
        """Callables applied in turn to the input, the i-th returning ``feature_info[i]``'s map;
        the last one's output is ``forward_features``'."""
        raise NotImplementedError

    def forward_features(self, x: torch.Tensor) -> torch.Tensor:
        for stage in self._feature_stages():
            x = self._run(stage, x)
        return x

    def _run(self, stage, x: torch.Tensor) -> torch.Tensor:
        if self.grad_checkpointing and torch.is_grad_enabled() and not torch.jit.is_scripting():
            return checkpoint(stage, x, use_reentrant=False)
        return stage(x)

    def forward_intermediates(
        self,
        x: torch.Tensor,
        indices: int | list[int] | None = None,
        norm: bool = False,
        stop_early: bool = False,
        output_fmt: str = "NCHW",
        intermediates_only: bool = False,
    ):
        """timm's ``forward_intermediates``: the feature maps at ``indices`` of ``feature_info``
        (None: all; an int n: the last n), and unless ``intermediates_only`` the final features.
        ``norm`` has no effect (no final norm layer); ``stop_early`` stops at the last index taken."""
        if output_fmt != "NCHW":
            raise ValueError(f"output_fmt must be 'NCHW', got {output_fmt!r}")
        stages = self._feature_stages()
        take, last = feature_take_indices(len(stages), indices)
        intermediates = []
        if stop_early or intermediates_only:
            stages = stages[: last + 1]
        for i, stage in enumerate(stages):
            x = self._run(stage, x)
            if i in take:
                intermediates.append(x)
        return intermediates if intermediates_only else (x, intermediates)
