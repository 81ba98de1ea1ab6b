"""quadnn: quadratic neurons, the ReLinear training strategy and the paper's models."""

from . import models, relinear
from .convert import quadratize
from .layers import NEURONS, QuadraticConv1d, QuadraticConv2d, QuadraticConv3d, QuadraticLayer, QuadraticLinear, Square
from .recompute import plan_recompute

__version__ = "0.2.1"

__all__ = [
    "NEURONS",
    "QuadraticConv1d",
    "QuadraticConv2d",
    "QuadraticConv3d",
    "QuadraticLayer",
    "QuadraticLinear",
    "Square",
    "relinear",
    "quadratize",
    "plan_recompute",
]
