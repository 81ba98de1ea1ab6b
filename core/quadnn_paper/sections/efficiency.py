"""The efficiency section: what :mod:`quadnn.bench` measures at each profile, and the paper's
time per epoch beside it. The measurement itself is the library's (``python -m quadnn.bench``)."""
from __future__ import annotations

from quadnn_paper.common import published
from quadnn_paper.common.profiles import select

__all__ = ["PROTOCOLS", "PAPER_EPOCH_SECONDS", "protocol", "tiny_protocol"]

_FAMILY20 = ("cifar_qresnet20", "cifar_qresnet20_compact", "cifar_parabolic_resnet20", "cifar_poly_resnet20")
_FAMILY56 = ("cifar_qresnet56", "cifar_qresnet56_compact", "cifar_parabolic_resnet56", "cifar_poly_resnet56")
# The efficiency notebook's protocol per profile. "full" is the paper's training setting
# (CIFAR batch 128, 3x32x32, float32) with more timed steps; the paper itself reports time per
# epoch on its GPU, which a CPU cannot reproduce.
# compile_models: the models also timed under torch.compile (none at smoke: compiling a ResNet's
# forward and backward takes about a minute on a CPU).
PROTOCOLS = {
    "smoke": dict(models=("cifar_qresnet20",), batch_size=8, input=(3, 16, 16), steps=2, warmup=1,
                  implementations=("default", "naive"), threads=1, compile_models=()),
    "cpu": dict(models=_FAMILY20 + ("cifar_qresnet56",), batch_size=128, input=(3, 32, 32), steps=7, warmup=2,
                implementations=("default", "fast", "speed", "lean", "naive"), threads=None,
                compile_models=("cifar_qresnet20",)),
    "full": dict(models=_FAMILY20 + _FAMILY56, batch_size=128, input=(3, 32, 32), steps=30, warmup=3,
                 implementations=("default", "fast", "speed", "lean", "fused", "naive"), threads=None,
                 compile_models=_FAMILY20),
}
# The paper's Table (CIFAR-10 comparison), "Time" column: training time per epoch in seconds.
PAPER_EPOCH_SECONDS = published.CIFAR_EPOCH_SECONDS


def protocol(profile: str) -> dict:
    """A copy of the protocol of ``profile``."""
    return dict(select(PROTOCOLS, profile))


def tiny_protocol(P: dict) -> dict:
    """TINY=1: the full protocol's models, implementations and input, with two timed steps and
    one compiled model (the code path, not a measurement)."""
    return dict(P, steps=2, warmup=1, compile_models=tuple(P["compile_models"])[:1])
