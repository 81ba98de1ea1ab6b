"""Forward FLOPs per image of the full profile's models, for the first-contact cost estimates.

    PYTHONPATH=core python tools/flops.py

Counted by ``torch.utils.flop_counter.FlopCounterMode`` (2 FLOPs per multiply-add) on one image
on the CPU; printed as the Markdown table of docs/gpu.md.
"""

import timm
import torch
from torch.utils.flop_counter import FlopCounterMode

import quadnn.models  # noqa: F401  (registers the models in timm)
from quadnn_paper.sections import kitti_lapdepth as depth

ROWS = [
    ("cifar_resnet20", "cifar_qresnet20", 32),
    ("cifar_resnet56", "cifar_qresnet56", 32),
    ("imagenet_resnet18", "imagenet_qresnet18", 224),
    ("imagenet_resnet34", "imagenet_qresnet34", 224),
]


def gflops(model, height: int, width: int) -> float:
    model.eval()
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        model(torch.zeros(1, 3, height, width))
    return counter.get_total_flops() / 1e9


def main() -> None:
    torch.set_num_threads(1)
    print("| conventional / quadratic | input | GFLOP / image (forward) | ratio |\n|---|---|---|---|")
    for conv, quad, size in ROWS:
        classes = 10 if conv.startswith("cifar") else 1000
        a, b = (gflops(timm.create_model(m, num_classes=classes), size, size) for m in (conv, quad))
        print(f"| {conv} / {quad} | {size} x {size} | {a:.3g} / {b:.3g} | {b / a:.2f} |")
    h, w = depth.PROTOCOLS["full"]["train_height"], depth.PROTOCOLS["full"]["train_width"]
    enc = depth.PROTOCOLS["full"]["encoder"]
    a, b = (gflops(depth.build_model(m, encoder=enc), h, w) for m in depth.MODELS)
    print(f"| LapDepth / Quadratic-LapDepth ({enc}) | {h} x {w} | {a:.3g} / {b:.3g} | {b / a:.2f} |")


if __name__ == "__main__":
    import argparse

    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()
    main()
