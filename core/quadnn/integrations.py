"""Rules quadnn gives the tools that find a layer's rule by its exact type, so they handle the
quadratic layers without extra arguments.

=============================================  ==============================================
``thop.profile``                               counting rule per layer type (:mod:`quadnn.counting`)
``ptflops`` (its default pytorch backend)      counting hook per layer type
``torchinfo.summary``                          Mult-Adds of a quadratic layer (it reads ``weight_g``
                                               and ``weight_b`` as a recurrent layer's weights)
``torch.ao.quantization.fuse_modules``         exact conv-BN fusion (:mod:`quadnn.fusion`)
=============================================  ==============================================

Each tool gets its rules when it is imported, before or after quadnn: :func:`install` (run by
``import quadnn``) registers them with the tools already imported and puts a finder on
``sys.meta_path`` that registers them as the others are imported. Nothing is imported for this.
fvcore and ``torch.utils.flop_counter`` need no rule: they count the operations the layers run.
A rule that no longer fits a tool's new version is skipped with a warning.
"""

from __future__ import annotations

import importlib.abc
import sys
import warnings

__all__ = ["install", "RULES"]


def _thop(module) -> None:
    from .counting import thop_ops

    for layer, rule in thop_ops().items():
        module.register_hooks.setdefault(layer, rule)


def _ptflops(module) -> None:
    from .counting import ptflops_hooks

    for layer, rule in ptflops_hooks().items():
        module.MODULES_MAPPING.setdefault(layer, rule)


def _torchinfo(module) -> None:
    from .counting import torchinfo_macs

    cls = module.LayerInfo
    if getattr(cls.calculate_macs, "_quadnn", False):
        return
    original = cls.calculate_macs

    def calculate_macs(self) -> None:
        if not torchinfo_macs(self):
            original(self)

    calculate_macs._quadnn = True
    cls.calculate_macs = calculate_macs


def _torch_ao(module) -> None:
    from .fusion import register_with_torch_ao

    register_with_torch_ao(module)


# module whose import brings a tool's table -> what registers quadnn's rules in it
RULES = {
    "thop.profile": _thop,
    "ptflops.pytorch_ops": _ptflops,
    "torchinfo.layer_info": _torchinfo,
    "torch.ao.quantization.fuser_method_mappings": _torch_ao,
}


def _register(name: str, module) -> None:
    try:
        RULES[name](module)
    except Exception as e:  # a tool's new version moved its table: quadnn must still import
        warnings.warn(f"quadnn could not register its rules with {name}: {e!r}", stacklevel=2)


class _Loader(importlib.abc.Loader):
    """The tool's own loader, then quadnn's rules; the module keeps its own loader."""

    def __init__(self, loader, name: str):
        self.loader, self.name = loader, name

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module) -> None:
        module.__loader__ = module.__spec__.loader = self.loader
        self.loader.exec_module(module)
        _register(self.name, module)


class _Finder(importlib.abc.MetaPathFinder):
    """Finds the modules of :data:`RULES` with the finders after it and wraps their loaders."""

    def find_spec(self, fullname, path, target=None):
        if fullname not in RULES:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _Loader(spec.loader, fullname)
                return spec
        return None


def install() -> None:
    """Register the rules with the tools imported already and, through a finder, with those
    imported later (once per process)."""
    if any(isinstance(f, _Finder) for f in sys.meta_path):
        return
    sys.meta_path.insert(0, _Finder())
    for name in RULES:
        if name in sys.modules:
            _register(name, sys.modules[name])
