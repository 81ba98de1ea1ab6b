"""A finished quadratic run's departure from its linear twin, recorded in its result.

Weight-space: :func:`quadnn.departure.term_norms`. Function-space: the share of test images whose
predicted class changes when the trained network's quadratic terms are reset to their ReLinear
reference (:func:`quadnn.departure.linear_twin`), and that twin's own error. The sections read it
to say whether a claim about the quadratic terms was tested where the terms acted.
"""

from __future__ import annotations

from torch import nn

from quadnn.departure import linear_twin, term_norms

__all__ = ["measure"]


def measure(model: nn.Module, task, device, amp: bool) -> dict | None:
    """``{gate, power, terms, gate_bias, constant, changed, twin_error}`` of a trained ``model`` (norm
    ratios as fractions, ``changed`` and ``twin_error`` in % of the test images); None for a model
    without quadratic layers. ``changed``/``twin_error`` are left out where the task has no
    predictions (:meth:`Task.predictions`)."""
    out = term_norms(model)
    if not out:
        return None
    ours = task.predictions(model, device, amp)
    if ours is not None:
        twin = task.predictions(linear_twin(model), device, amp)
        (pred, label), (twin_pred, _) = ours, twin
        out["changed"] = 100.0 * float((pred != twin_pred).double().mean())
        out["twin_error"] = 100.0 * float((twin_pred != label).double().mean())
    return out
