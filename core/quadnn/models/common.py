"""What the model families share: He et al.'s initialisation, the backward-memory plan of their
quadratic layers, and timm's classifier interface."""
from __future__ import annotations

import torch
from torch import nn

from ..recompute import plan_recompute


class ConvClassifier(nn.Module):
    """Base of the CIFAR ResNet, CIFAR VGG and ImageNet ResNet families.

    Subclasses build ``self.fc`` (a Linear, or Identity for ``num_classes=0``) on top of
    ``self.num_features`` channels and call :meth:`reset_parameters` at the end of ``__init__``.
    """

    fc: nn.Module
    num_features: int

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
        # He et al.: Kaiming-normal convolutions (the linear branch of quadratic ones), BN at
        # (1, 0), the classifier as torch initialises it. Quadratic terms keep the ReLinear
        # values their layers set.
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)

    # -- timm interface -----------------------------------------------------------------
    def get_classifier(self) -> nn.Module:
        return self.fc

    def reset_classifier(self, num_classes: int, global_pool: str = "avg") -> None:
        self.num_classes = num_classes
        self.fc = nn.Linear(self.num_features, num_classes) if num_classes > 0 else nn.Identity()
