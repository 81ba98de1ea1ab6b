"""The benchmark harness: the training-step time, launches, memory and FLOPs of quadratic networks
against their conventional baseline and against the fastest a quadratic layer could be here.

    python -m quadnn_paper.bench --models cifar_qresnet20 --implementations default naive [--device cuda] [--json]

Each job has its module: ``models`` (what is timed), ``timing``, ``launches``, ``limit``,
``memory``, ``harness`` (the rows and their columns), ``cli``.
"""

from quadnn.counting import forward_gflops
from quadnn_paper.common.machine import machine

from .cli import main, parse_input
from .harness import Row, format_table, plan_rows, run
from .launches import aten_launches, cuda_launches, extra_launches_floor, launch_floor
from .limit import SGD_ELEMENTS_PER_PARAMETER, elementwise_elements, unavoidable_convolutions
from .memory import cuda_step_memory, step_memory
from .models import (
    DEFAULT_MODELS,
    EQUAL_RTOL,
    IMPLEMENTATIONS,
    baseline_name,
    check_implementation,
    compare_implementations,
    create,
    is_quadratic,
    randomise_terms_,
    set_implementation,
)
from .timing import Clock, batch, compare, conv_share, make_step, no_tf32, quartiles, to_device

__all__ = [
    "main",
    "run",
    "Row",
    "plan_rows",
    "create",
    "baseline_name",
    "batch",
    "make_step",
    "forward_gflops",
    "format_table",
    "set_implementation",
    "compare_implementations",
    "compare",
    "step_memory",
    "machine",
    "Clock",
    "elementwise_elements",
    "unavoidable_convolutions",
    "aten_launches",
    "launch_floor",
    "extra_launches_floor",
    "cuda_launches",
    "no_tf32",
]
