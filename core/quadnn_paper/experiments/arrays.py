"""Arrays in a computation's JSON result: a data sample a figure shows, stored exactly (its bytes
in base64) and compactly (a full-size image as a list of numbers would take tens of megabytes)."""

from __future__ import annotations

import base64

import numpy as np

__all__ = ["pack", "unpack"]


def pack(array) -> dict:
    """``array`` (numpy, or anything ``np.asarray`` takes) as a JSON-able dict."""
    a = np.ascontiguousarray(np.asarray(array))
    return dict(dtype=a.dtype.str, shape=list(a.shape), data=base64.b64encode(a.tobytes()).decode("ascii"))


def unpack(packed: dict) -> np.ndarray:
    """The array :func:`pack` stored."""
    raw = base64.b64decode(packed["data"])
    return np.frombuffer(raw, dtype=np.dtype(packed["dtype"])).reshape(packed["shape"]).copy()
