"""CUDA's rules on a CPU-only machine: a stand-in compute device, and strict fakes of the
``torch.cuda`` and ``torch.distributed`` calls the engine makes.

- :class:`StandInDevice` (a dispatch mode) gives the tests a second device, reported as
  ``meta``, whose tensors are CPU tensors underneath, so a whole training step really computes.
  Inside the mode ``.to(DEVICE)`` and factories with ``device=DEVICE`` make :class:`OnDevice`
  tensors, and every op enforces CUDA's rule: its tensors all on one device, except CPU scalars
  (0-dim) in elementwise ops and the copies between devices. A CPU tensor created without ``device=`` and mixed
  into the step fails here as it would on a GPU. (One blind spot: ``torch.tensor(data,
  device=DEVICE)`` makes a data-less meta tensor without dispatching; ops refuse those.)
- :class:`StrictNCCL` replaces the collectives with single-process ones that refuse any
  tensor not on the rank's compute device, as NCCL does (its device map is ``{'cuda': 'nccl'}``).
- :class:`StrictCuda` replaces ``torch.cuda``'s device calls with ones that check their
  arguments with torch's own check (``set_device`` needs an index) and an ordinal range.
"""

from __future__ import annotations

from types import SimpleNamespace

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_map

DEVICE = torch.device("meta")
aten = torch.ops.aten
_CROSS_DEVICE = {aten._to_copy.default, aten.copy_.default, aten._copy_from.default}


class OnDevice(torch.Tensor):
    """A CPU tensor (``elem``) that reports :data:`DEVICE`."""

    @staticmethod
    def __new__(cls, elem: torch.Tensor):
        r = torch.Tensor._make_wrapper_subclass(
            cls,
            elem.size(),
            strides=elem.stride(),
            storage_offset=elem.storage_offset(),
            dtype=elem.dtype,
            layout=elem.layout,
            device=DEVICE,
            requires_grad=False,
        )
        r.elem = elem
        return r

    def __repr__(self):
        return f"OnDevice({self.elem!r})"

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        return _dispatch(func, args, kwargs or {})


def _unwrap(x):
    return x.elem if isinstance(x, OnDevice) else x


def _wrap(x):
    return OnDevice(x) if isinstance(x, torch.Tensor) and not isinstance(x, OnDevice) else x


def _dispatch(func, args, kwargs):
    tensors = [t for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)]
    ours = any(isinstance(t, OnDevice) for t in tensors)
    target = kwargs.get("device")
    if target is not None:
        target = torch.device(target)
        kwargs = dict(kwargs, device=torch.device("cpu")) if target == DEVICE else kwargs
    if any(t.is_meta and not isinstance(t, OnDevice) for t in tensors):
        raise RuntimeError(
            f"{func} got a data-less meta tensor: torch.tensor/as_tensor(data, device=...) skips "
            "the stand-in for meta; build it with torch.full/zeros(..., device=...) or .to(device)"
        )
    if func not in _CROSS_DEVICE and ours:
        # CUDA lets a 0-dim CPU tensor into elementwise ops only (TensorIterator takes it as a
        # scalar); torch.stack, cat, index_put, ... refuse it as they refuse any CPU tensor
        pointwise = torch.Tag.pointwise in func.tags
        stray = [t for t in tensors if not isinstance(t, OnDevice) and (t.dim() > 0 or not pointwise)]
        if stray:
            raise RuntimeError(
                f"Expected all tensors to be on the same device, but found at least two devices, "
                f"{DEVICE} and {stray[0].device}! ({func}, a CPU tensor of shape "
                f"{tuple(stray[0].shape)})"
            )
    out = func(*tree_map(_unwrap, args), **tree_map(_unwrap, kwargs))
    if func._schema.is_mutable or func is aten._local_scalar_dense.default:
        # in place (or a Python number): the tensors the caller holds already are the results
        mutated = args[0] if func._schema.is_mutable and args else None
        return mutated if isinstance(out, torch.Tensor) and mutated is not None and _unwrap(mutated) is out else out
    on_device = target == DEVICE if target is not None else ours
    return tree_map(_wrap, out) if on_device else out


class StandInDevice(TorchDispatchMode):
    """See the module doc; ``device`` is what the engine should be given as its compute device."""

    device = DEVICE

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return _dispatch(func, args, kwargs or {})


def to_cpu(obj):
    """Tensors in ``obj`` (nested dicts/lists) as plain CPU tensors, e.g. before ``torch.save``."""
    return tree_map(lambda t: t.elem.clone() if isinstance(t, OnDevice) else t, obj)


class StrictNCCL:
    """Single-process stand-ins of the collectives the engine calls, with NCCL's device rule.

    ``install(monkeypatch, device)`` patches ``torch.distributed``; every reduced tensor is
    recorded in ``reduced`` as ``(shape, device)``.
    """

    def __init__(self, device: torch.device):
        self.device, self.reduced, self.barriers = torch.device(device), [], 0

    def install(self, monkeypatch):
        import torch.distributed as dist

        monkeypatch.setattr(dist, "all_reduce", self.all_reduce)
        monkeypatch.setattr(dist, "barrier", self.barrier)
        monkeypatch.setattr(dist, "all_gather_object", self.all_gather_object)
        return self

    def all_reduce(self, tensor, op=None, group=None, async_op=False):
        if tensor.device != self.device:
            # what ProcessGroupNCCL answers for a tensor off the GPU
            raise RuntimeError(
                f"No backend type associated with device type {tensor.device.type} "
                f"(NCCL reduces tensors on {self.device} only)"
            )
        self.reduced.append((tuple(tensor.shape), tensor.device))

    def barrier(self, group=None, async_op=False, device_ids=None):
        self.barriers += 1

    def all_gather_object(self, object_list, obj, group=None):
        for i in range(len(object_list)):
            object_list[i] = obj


class StrictCuda:
    """``torch.cuda``'s device calls for a machine with ``n`` GPUs that it does not have.

    ``set_device`` checks its argument with torch's own ``_get_device_index`` (which refuses
    ``torch.device("cuda")`` without an index, before touching CUDA) and the ordinal range.
    """

    def __init__(self, n: int = 1, memory_gb: float = 80):
        self.n, self.current, self.memory_gb, self.synchronized = n, None, memory_gb, []

    def _index(self, device) -> int:
        from torch.cuda._utils import _get_device_index

        index = self.current or 0 if device is None else _get_device_index(device)
        if not 0 <= index < self.n:
            raise RuntimeError(f"CUDA error: invalid device ordinal {index} (this machine has {self.n})")
        return index

    def install(self, monkeypatch):
        monkeypatch.setattr(torch.cuda, "is_available", lambda: self.n > 0)
        monkeypatch.setattr(torch.cuda, "device_count", lambda: self.n)
        monkeypatch.setattr(torch.cuda, "set_device", self.set_device)
        monkeypatch.setattr(torch.cuda, "synchronize", self.synchronize)
        monkeypatch.setattr(torch.cuda, "get_device_name", lambda i=None: f"Stand-in GPU {self._index(i)}")
        monkeypatch.setattr(torch.cuda, "get_device_capability", self.get_device_capability)
        monkeypatch.setattr(
            torch.cuda,
            "get_device_properties",
            lambda i=None: SimpleNamespace(total_memory=int(self.memory_gb * 2**30)),
        )
        for name in ("benchmark", "allow_tf32"):  # set by the engine; restored after the test
            monkeypatch.setattr(torch.backends.cudnn, name, getattr(torch.backends.cudnn, name))
        # cuBLAS's flags cannot be monkeypatched one by one: a stand-in namespace for the test
        monkeypatch.setattr(
            torch.backends.cuda, "matmul", SimpleNamespace(allow_tf32=torch.backends.cuda.matmul.allow_tf32)
        )
        return self

    def synchronize(self, device=None):
        """Records the device waited for (the stand-in compute device counts as this machine's GPU)."""
        if device is not None and torch.device(device) != DEVICE:
            self._index(device)
        self.synchronized.append(device)

    def get_device_capability(self, device=None) -> tuple[int, int]:
        self._index(device)
        return (9, 0)  # a Hopper's

    def set_device(self, device):
        from torch.cuda._utils import _get_device_index

        _get_device_index(device)  # refuses a bare "cuda", as torch does
        self.current = self._index(device)
