"""quadnn: quadratic neurons, the ReLinear training strategy and the paper's models."""
from .layers import (NEURONS, QuadraticConv1d, QuadraticConv2d, QuadraticConv3d, QuadraticLayer,
                     QuadraticLinear, Square)
from . import relinear
from .convert import quadratize
from .recompute import plan_recompute
from . import models

__version__ = "0.2.0"

__all__ = [
    "NEURONS", "QuadraticConv1d", "QuadraticConv2d", "QuadraticConv3d", "QuadraticLayer", "QuadraticLinear", "Square",
    "relinear", "quadratize", "plan_recompute",
]
