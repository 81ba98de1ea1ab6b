"""Every number the paper prints that this report quotes, in one place.

The paper is Fan, Li, Wang, Lai and Wang, "On Expressivity and Trainability of Quadratic
Networks" (its LaTeX source is the reference the test ``tests/test_paper_numbers.py`` checks
these values against). The section modules' ``PAPER`` dicts are these dicts under other
names (``quadnn_paper.sections.cifar_tuning.PAPER`` is :data:`CIFAR_TUNING`, and so on).

A value keeps the text the paper prints (``Printed("9.80")`` is the float 9.8 that prints as
``9.80``), so the report quotes it digit for digit. :func:`macros` names each quoted value as a
LaTeX macro ``\\paper<Name>``; ``python -m quadnn_paper.common.published paper/variables/published.tex``
writes them (``make paper`` does, before LaTeX), and ``paper/sections/*.tex`` use the macros
instead of typing the numbers.
"""

from __future__ import annotations

from pathlib import Path

__all__ = [
    "Printed",
    "CIFAR_TUNING",
    "CIFAR_TUNING_BEST",
    "CIFAR_TUNING_PROTOCOL",
    "CIFAR_MAIN",
    "CIFAR_COMPACT",
    "CIFAR_COMPACT_PARAMS",
    "CIFAR_WIDTH",
    "CIFAR_EPOCH_SECONDS",
    "TRANSFER_COST_PERCENT",
    "CIFAR_PARAMS_QUADRATIC_BASELINES",
    "VGG",
    "VGG_SQUARE_LRS",
    "VGG_QUADRATIC_LR",
    "IMAGENET",
    "IMAGENET_PROTOCOL",
    "KITTI",
    "KITTI_PROTOCOL",
    "LAPDEPTH_OWN_RMSE",
    "RUNGE",
    "RUNGE_RMSE",
    "RUNGE_PIECES",
    "RUNGE_LRS",
    "EXPRESSIVITY",
    "IMAGENET_CLASSES",
    "KITTI_TRAIN_IMAGES",
    "macros",
    "write",
]


class Printed(float):
    """A float that remembers how the paper prints it (trailing zeros included)."""

    def __new__(cls, text: str):
        value = super().__new__(cls, text)
        value.text = text
        return value

    def __str__(self) -> str:
        return self.text

    def __reduce__(self):
        return (Printed, (self.text,))


P = Printed

# -- Image classification, ReLinear variants on CIFAR-10 (QResNet20): best error per variant, % --
# (quadnn_paper.sections.cifar_tuning.PAPER)
CIFAR_TUNING = {
    "sg": P("7.78"),  # ReLinear-sg, gamma_g = gamma_b = 1e-4
    "sw": P("8.21"),  # ReLinear-sw, l2, beta = 0.9
    "transfer": {"1": P("7.18"), "2": P("7.5"), "3": P("7.75")},  # weight transfer from stage 1/2/3
}
CIFAR_TUNING_BEST = {"sg": P("1e-4"), "sw": P("0.9")}  # the settings of those best errors
# The protocol the tuning text gives: batch 128, gamma_r = 0.1, 200 epochs, rates / 10 at 100 and 150.
CIFAR_TUNING_PROTOCOL = {
    "batch_size": 128,
    "lr": P("0.1"),
    "epochs": 200,
    "milestones": (100, 150),
    "lr_decay": P("0.1"),
}

# -- CIFAR-10 comparison tables (error %, as printed; strings as in cifar_study's _PAPER_* dicts) --
CIFAR_MAIN = {
    "ResNet20": "8.75",
    "ResNet32": "7.51",
    "ResNet56": "6.97",
    "ResNet110": "6.61",
    "ResNet1202": "7.93",
    "Parabolic-ResNet20": "7.89",
    "Parabolic-ResNet32": "7.25",
    "Parabolic-ResNet56": "8.89",
    "PolyResNet20": "9.80",
    "PolyResNet32": "7.62",
    "PolyResNet56": "8.31",
    "QResNet20 (r.i., ReLinear)": "7.78",
    "QResNet20 (r.i., ReLinear+ReZero)": "7.97",
    "QResNet20 (w.t., ReLinear)": "7.17",
    "QResNet32 (r.i., ReLinear)": "7.18",
    "QResNet32 (r.i., ReLinear+ReZero)": "6.90",
    "QResNet32 (w.t., ReLinear)": "6.38",
    "QResNet56 (r.i., ReLinear)": "6.43",
    "QResNet56 (r.i., ReLinear+ReZero)": "6.34",
    "QResNet56 (w.t., ReLinear)": "6.22",
    "QResNet110 (r.i., ReLinear)": "6.36",
    "QResNet110 (r.i., ReLinear+ReZero)": "6.12",
    "QResNet110 (w.t., ReLinear)": "5.44",
}
CIFAR_COMPACT = {20: "7.76", 32: "6.56", 56: "6.30"}  # Compact-QResNet (w.t., ReLinear)
# The compact table's "Params" column (millions), by model.
CIFAR_COMPACT_PARAMS = {
    "cifar_qresnet20": P("0.81"),
    "cifar_qresnet20_compact": P("0.54"),
    "cifar_qresnet32": P("1.39"),
    "cifar_qresnet32_compact": P("0.92"),
    "cifar_qresnet56": P("2.55"),
    "cifar_qresnet56_compact": P("1.92"),
}
CIFAR_WIDTH = {
    (32, 1.5): "6.45",
    (32, 2.0): "6.75",
    (32, 2.5): "7.44",
    (56, 1.5): "6.84",
    (56, 2.0): "6.12",
    (56, 2.5): "6.58",
}  # (depth, channel multiplier)
# "Time" column of the main table: training seconds per epoch (quadnn_paper.sections.efficiency.PAPER_EPOCH_SECONDS).
CIFAR_EPOCH_SECONDS = {
    "cifar_resnet20": P("10.43"),
    "cifar_qresnet20": P("10.87"),
    "cifar_parabolic_resnet20": P("8.98"),
    "cifar_poly_resnet20": P("10.59"),
    "cifar_resnet32": P("14.39"),
    "cifar_qresnet32": P("15.56"),
    "cifar_parabolic_resnet32": P("12.48"),
    "cifar_poly_resnet32": P("15.29"),
    "cifar_resnet56": P("21.61"),
    "cifar_qresnet56": P("27.72"),
    "cifar_parabolic_resnet56": P("19.79"),
    "cifar_poly_resnet56": P("25.67"),
    "cifar_resnet110": P("40.81"),
    "cifar_qresnet110": P("55.18"),
}
# Weight transfer's extra cost the paper estimates (%): training the conventional network costs this
# share of the quadratic one, "because the number of multiplications of a conventional neuron is
# 20% of that of a quadratic neuron".
TRANSFER_COST_PERCENT = P("20")
# The parameter count the main table prints for every Parabolic- and PolyResNet (millions).
CIFAR_PARAMS_QUADRATIC_BASELINES = P("0.54")

# -- CIFAR-100, VGG16 (error %) --
VGG = {"Quadratic-VGG16 (ReLinear)": P("28.33"), "square activation": "no converge"}
VGG_SQUARE_LRS = (P("0.05"), P("0.03"), P("0.01"))  # the three rates of the square-activation VGG16
VGG_QUADRATIC_LR = {"lr": P("0.1"), "lr_g": P("1e-6")}  # Quadratic-VGG16: gamma_r, gamma_g = gamma_b

# -- ImageNet: top-1 error %, 10-crop (quadnn_paper.sections.imagenet.PAPER; keys are our model names) --
IMAGENET = {
    "imagenet_plain18": P("27.94"),
    "imagenet_plain34": P("28.54"),
    "imagenet_resnet18": P("27.88"),
    "imagenet_resnet34": P("25.03"),
    "imagenet_parabolic_resnet18": P("28.22"),
    "imagenet_parabolic_resnet34": P("24.64"),
    "imagenet_poly_resnet18": P("27.82"),
    "imagenet_poly_resnet34": P("24.63"),
    "imagenet_qresnet18": P("27.67"),
    "imagenet_qresnet34": P("24.01"),
}
IMAGENET_PROTOCOL = {
    "batch_size": 256,
    "lr": P("0.1"),
    "weight_decay": P("0.0001"),
    "momentum": P("0.9"),
    "lr_g": P("1e-5"),
}
IMAGENET_CLASSES = 1000  # the classes of ImageNet's classifier (the paper: "from $1,000$ classes")

# -- KITTI, Eigen split (quadnn_paper.sections.kitti_lapdepth.PAPER) --
KITTI = {
    "LapDepth (official)": dict(sq_rel=P("0.212"), rmse=P("0.446")),
    "LapDepth (replicated)": dict(sq_rel=P("0.214"), rmse=P("0.458")),
    "Quadratic-LapDepth": dict(sq_rel=P("0.200"), rmse=P("0.427")),
}
KITTI_PROTOCOL = {
    "epochs": 50,
    "batch_size": 16,
    "betas": (P("0.9"), P("0.999")),
    "weight_decay_encoder": P("0.0005"),
    "lr_power": P("0.5"),
    "lr": P("1e-4"),
    "end_lr": P("1e-5"),
}
KITTI_TRAIN_IMAGES = 23488  # the Eigen split's training images (the paper: "23,488 images")
# Not in the paper: the RMSE (m) LapDepth's own paper reports, which we quote to explain the
# paper's 0.446 (a dropped leading digit, we think). Excluded from the check against the source.
LAPDEPTH_OWN_RMSE = P("2.446")

# -- Runge function (quadnn_paper.sections.runge.PAPER, PAPER_RMSE, PAPER_PIECES) --
RUNGE = dict(n_train=33, interval=(-5.0, 5.0), width=8, depth=5, iterations=30_000, n_test=100)
RUNGE_RMSE = {"regular": None, "relinear-init": None, "sw-l1": P("0.0656"), "sw-l2": P("0.0426"), "sg": P("0.0205")}
RUNGE_PIECES = 24
RUNGE_LRS = {"lr": P("0.0003"), "lr_g": P("0.00015"), "shrink": P("0.0001")}  # rates, ReLinear-sg rate, sw factors

# -- Expressivity (quadnn_paper.sections.expressivity.PAPER) --
EXPRESSIVITY = dict(
    oscillation_widths=(1, 10, 10, 10, 10, 1),
    oscillation_sigmas=(P("0.01"), P("0.02"), P("0.03")),
    amplification_sigma=1.0,
    hall_meyer_printed={1: P("0.25"), 2: P("0.013"), 6: P("0.00000137")},
)


def _tex(value) -> str:
    """A value as the paper prints it; powers of ten as ``10^{k}`` (math mode is the caller's)."""
    text = value.text if isinstance(value, Printed) else str(value)
    if "e" in text:
        mant, exp = text.split("e")
        return (f"{mant}\\times" if mant != "1" else "") + f"10^{{{int(exp)}}}"
    return text


def _sci(value) -> str:
    """``0.00015`` -> ``1.5\\times10^{-4}`` (math mode is the caller's)."""
    mant, exp = f"{float(value):e}".split("e")
    mant = mant.rstrip("0").rstrip(".")
    return (f"{mant}\\times" if mant != "1" else "") + f"10^{{{int(exp)}}}"


def _runge_test_not_trained() -> int:
    """How many of the Runge protocol's equispaced test points are not training points (exact)."""
    from fractions import Fraction

    lo, hi = (Fraction(v) for v in RUNGE["interval"])

    def grid(n):
        return {lo + (hi - lo) * Fraction(i, n - 1) for i in range(n)}

    return len(grid(RUNGE["n_test"]) - grid(RUNGE["n_train"]))


def macros() -> dict[str, str]:
    """``Name -> text`` of each ``\\paper<Name>`` macro the report uses (names are letters only)."""
    words = {1: "One", 2: "Two", 3: "Three"}
    m = {
        "TuningSg": _tex(CIFAR_TUNING["sg"]),
        "TuningSw": _tex(CIFAR_TUNING["sw"]),
        "TuningSgBest": _tex(CIFAR_TUNING_BEST["sg"]),
        "TuningSwBest": _tex(CIFAR_TUNING_BEST["sw"]),
        "TuningLr": _tex(CIFAR_TUNING_PROTOCOL["lr"]),
        "TuningBatch": _tex(CIFAR_TUNING_PROTOCOL["batch_size"]),
        "TuningEpochs": _tex(CIFAR_TUNING_PROTOCOL["epochs"]),
        "TuningMilestoneOne": _tex(CIFAR_TUNING_PROTOCOL["milestones"][0]),
        "TuningMilestoneTwo": _tex(CIFAR_TUNING_PROTOCOL["milestones"][1]),
        "CifarParamsQuadBaselines": _tex(CIFAR_PARAMS_QUADRATIC_BASELINES) + "M",
        "CifarWideResFiftySix": CIFAR_WIDTH[(56, 2.0)],
        "CifarQResFiftySixWt": CIFAR_MAIN["QResNet56 (w.t., ReLinear)"],
        "TransferCost": _tex(TRANSFER_COST_PERCENT),
        "EpochSecondsResTwenty": _tex(CIFAR_EPOCH_SECONDS["cifar_resnet20"]),
        "EpochSecondsQResTwenty": _tex(CIFAR_EPOCH_SECONDS["cifar_qresnet20"]),
        "EpochSecondsRatio": f"{CIFAR_EPOCH_SECONDS['cifar_qresnet20'] / CIFAR_EPOCH_SECONDS['cifar_resnet20']:.2f}",
        "VggQuadError": _tex(VGG["Quadratic-VGG16 (ReLinear)"]),
        "VggSquareLrs": ", ".join(_tex(v) for v in VGG_SQUARE_LRS),
        "VggQuadLr": _tex(VGG_QUADRATIC_LR["lr"]),
        "VggQuadLrG": _tex(VGG_QUADRATIC_LR["lr_g"]),
        "ImagenetBatch": _tex(IMAGENET_PROTOCOL["batch_size"]),
        "ImagenetLr": _tex(IMAGENET_PROTOCOL["lr"]),
        "ImagenetMomentum": _tex(IMAGENET_PROTOCOL["momentum"]),
        "ImagenetLrG": _tex(IMAGENET_PROTOCOL["lr_g"]),
        "KittiSqRelQuad": _tex(KITTI["Quadratic-LapDepth"]["sq_rel"]),
        "KittiSqRelRepl": _tex(KITTI["LapDepth (replicated)"]["sq_rel"]),
        "KittiRmseOfficial": _tex(KITTI["LapDepth (official)"]["rmse"]),
        "KittiLapDepthOwnRmse": _tex(LAPDEPTH_OWN_RMSE),
        "KittiBetaOne": _tex(KITTI_PROTOCOL["betas"][0]),
        "KittiBetaTwo": _tex(KITTI_PROTOCOL["betas"][1]),
        "KittiBatch": _tex(KITTI_PROTOCOL["batch_size"]),
        "KittiEpochs": _tex(KITTI_PROTOCOL["epochs"]),
        "KittiLrPower": _tex(KITTI_PROTOCOL["lr_power"]),
        "RungeLr": _sci(RUNGE_LRS["lr"]),
        "RungeLrG": _sci(RUNGE_LRS["lr_g"]),
        "RungeShrink": _sci(RUNGE_LRS["shrink"]),
        "RungeTestPoints": _tex(RUNGE["n_test"]),
        "OscSigmas": ",".join(_tex(s) for s in EXPRESSIVITY["oscillation_sigmas"]),
        "OscSigmaMin": _tex(EXPRESSIVITY["oscillation_sigmas"][0]),
        "OscSigmaMax": _tex(EXPRESSIVITY["oscillation_sigmas"][-1]),
        "HallMeyerOnePrinted": _tex(EXPRESSIVITY["hall_meyer_printed"][1]),
        "OscWidths": "-".join(map(str, EXPRESSIVITY["oscillation_widths"])),
        "TuningLrDivisor": str(round(1 / CIFAR_TUNING_PROTOCOL["lr_decay"])),
        "ImagenetWeightDecay": _sci(IMAGENET_PROTOCOL["weight_decay"]),
        "ImagenetClasses": f"{IMAGENET_CLASSES:,d}".replace(",", "{,}"),
        "KittiTrainImages": f"{KITTI_TRAIN_IMAGES:,d}".replace(",", "{,}"),
        "KittiWeightDecay": _sci(KITTI_PROTOCOL["weight_decay_encoder"]),
        "KittiLr": _tex(KITTI_PROTOCOL["lr"]),
        "KittiEndLr": _tex(KITTI_PROTOCOL["end_lr"]),
        "RungeTrainPoints": _tex(RUNGE["n_train"]),
        "RungeInterval": "[{:g},{:g}]".format(*RUNGE["interval"]),
        "RungeWidths": "-".join(["1"] + [str(RUNGE["width"])] * (RUNGE["depth"] - 1) + ["1"]),
        "RungeDepth": _tex(RUNGE["depth"]),
        "RungeDegree": _tex(2 ** RUNGE["depth"]),
        "RungeTestNew": _tex(_runge_test_not_trained()),
    }
    for k, v in CIFAR_TUNING["transfer"].items():
        m[f"TuningTransfer{words[int(k)]}"] = _tex(v)
    for k in (1, 2):  # the rate the conventional network had in stages 2 and 3 (gamma_r / 10 per stage)
        m[f"TuningStageLr{words[k + 1]}"] = (
            f"{CIFAR_TUNING_PROTOCOL['lr'] * CIFAR_TUNING_PROTOCOL['lr_decay'] ** k:.{k + 1}f}"
        )
    return m


def write(path: str | Path) -> Path:
    """Write :func:`macros` as ``\\newcommand`` lines into ``path`` (atomically)."""
    from quadnn_paper.common.macros import write_macros

    comment = "The paper's numbers, from quadnn_paper/common/published.py; written by `make paper`, do not edit."
    return write_macros(path, comment, {f"paper{k}": v for k, v in macros().items()})


if __name__ == "__main__":
    import argparse

    p = argparse.ArgumentParser(prog="python -m quadnn_paper.common.published", description=write.__doc__)
    p.add_argument("path", help="the file to write, e.g. paper/variables/published.tex")
    write(p.parse_args().path)
