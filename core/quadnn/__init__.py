"""quadnn: quadratic neurons, the ReLinear training strategy and the paper's models."""

from . import fusion, integrations, models, neurons, relinear
from .convert import quadratize
from .layers import NEURONS, QuadraticConv1d, QuadraticConv2d, QuadraticConv3d, QuadraticLayer, QuadraticLinear, Square
from .recompute import plan_recompute

__version__ = "0.2.1"

integrations.install()  # counting and fusion rules for thop, ptflops, torchinfo, torch.ao (as they are imported)

__all__ = [
    "NEURONS",
    "QuadraticConv1d",
    "QuadraticConv2d",
    "QuadraticConv3d",
    "QuadraticLayer",
    "QuadraticLinear",
    "Square",
    "fusion",
    "neurons",
    "relinear",
    "quadratize",
    "plan_recompute",
]
