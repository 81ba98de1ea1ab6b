"""The run engine and runner tests start from: seconds long (digits, a quarter-width ResNet20, one
thread). Each test file states only what it changes."""

from quadnn_paper.engine import RunConfig

BASE = dict(
    model="cifar_resnet20",
    width=0.25,
    dataset="digits",
    train_limit=96,
    epochs=2,
    batch_size=32,
    optimizer="sgd",
    lr=0.05,
    relinear="none",
    threads=1,
    progress=False,
    device="cpu",
)


def small_run(**kw) -> RunConfig:
    return RunConfig(**{**BASE, **kw})
