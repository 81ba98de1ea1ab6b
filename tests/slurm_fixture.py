"""A real single-node SLURM for the runner tests, and a toy job that checkpoints like a training.

``slurm_cluster`` (session fixture) runs tools/slurm/up.sh: SLURM is brought up once (about 45 s
cold with the Debian packages to install, 2 s when only the daemons are to start, under 1 s when
it is up) and left running for the next session (tools/slurm/down.sh stops what up.sh started;
``QUADNN_SLURM_DOWN=1`` makes this fixture call it at the end). When up.sh says it cannot (not
root, no apt-get: exit code 3), every test using the fixture is skipped with up.sh's reason.
"""

import json
import os
import subprocess
import time
from pathlib import Path

import cloudpickle
import pytest

ROOT = Path(__file__).resolve().parents[1]
UP, DOWN = ROOT / "tools" / "slurm" / "up.sh", ROOT / "tools" / "slurm" / "down.sh"

# The toy job is pickled by value: SLURM's and the local runner's processes need not import tests/.
cloudpickle.register_pickle_by_value(__import__(__name__))


@pytest.fixture(scope="session")
def slurm_cluster():
    """Brings SLURM up (or skips, saying why); yields the cluster's state directory."""
    started = time.monotonic()
    proc = subprocess.run(["bash", str(UP)], capture_output=True, text=True)
    if proc.returncode == 3:
        pytest.skip(proc.stderr.strip().splitlines()[-1])
    if proc.returncode != 0:
        pytest.fail(f"tools/slurm/up.sh failed (exit {proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    print(f"SLURM up in {time.monotonic() - started:.1f} s: {proc.stdout.strip().splitlines()[-1]}")
    yield Path(os.environ.get("QUADNN_SLURM_DIR", "/var/tmp/quadnn-slurm"))
    if os.environ.get("QUADNN_SLURM_DOWN") == "1":
        subprocess.run(["bash", str(DOWN)], check=False)


def _write(path: Path, data) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, path)


class Toy:
    """A stand-in for one training run: ``epochs`` epochs of ``sleep_s`` seconds, each updating a
    deterministic value and checkpointing (epoch, value) to ``out/<key>.ckpt``; a re-run resumes
    from the checkpoint. At the end it writes ``out/<key>.json`` (the result: value, epochs, how
    many attempts it took) and appends (start, end, CUDA_VISIBLE_DEVICES) of the attempt that finishes to ``out/<key>.spans``.

    ``source``: key of a run whose result this one starts from (a weight transfer); it fails
    when that result is not there yet. ``fail``: raise at that epoch (a crashing run).
    ``rank_file``: each task appends its RANK/WORLD_SIZE/LOCAL_RANK/MASTER_ADDR there."""

    def __init__(self, out, key, epochs=3, sleep_s=0.3, source=None, fail=None, rank_file=False):
        self.out, self.key, self.epochs, self.sleep_s = str(out), key, epochs, sleep_s
        self.source, self.fail, self.rank_file = source, fail, rank_file

    def result_path(self):
        return Path(self.out) / f"{self.key}.json"

    def __call__(self):
        out = Path(self.out)
        start = time.time()
        if self.rank_file:
            with open(out / f"{self.key}.ranks", "a") as f:
                f.write(
                    " ".join(
                        os.environ.get(k, "?")
                        for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")
                    )
                    + "\n"
                )
            if os.environ.get("RANK", "0") != "0":
                return None
        ckpt = out / f"{self.key}.ckpt"
        state = json.loads(ckpt.read_text()) if ckpt.exists() else None
        if state is None:
            value = 1
            if self.source is not None:
                value = json.loads((out / f"{self.source}.json").read_text())["value"]
            state = {"epoch": 0, "value": value, "attempts": 0}
        state["attempts"] += 1
        _write(ckpt, state)
        while state["epoch"] < self.epochs:
            if self.fail is not None and state["epoch"] == self.fail:
                raise RuntimeError(f"toy run {self.key} fails at epoch {self.fail}")
            time.sleep(self.sleep_s)
            state["value"] = (state["value"] * 31 + state["epoch"] + len(self.key)) % 1_000_003
            state["epoch"] += 1
            _write(ckpt, state)
        _write(self.result_path(), {"value": state["value"], "epochs": state["epoch"], "attempts": state["attempts"]})
        with open(out / f"{self.key}.spans", "a") as f:
            f.write(f"{start} {time.time()} {os.environ.get('CUDA_VISIBLE_DEVICES', '-') or '-'}\n")
        return state["value"]


class SlowToLoad(Toy):
    """A Toy whose first unpickling (in the job, before submitit has installed its signal handlers,
    as a training's imports of torch are) appends to ``out/<key>.loading`` and then takes ``load_s``
    seconds; later loads (the requeued attempts) only append."""

    load_s = 8.0

    def __setstate__(self, state):
        self.__dict__.update(state)
        mark = Path(self.out) / f"{self.key}.loading"
        with open(mark, "a") as f:
            f.write(f"{time.time()}\n")
        if len(mark.read_text().splitlines()) == 1:
            time.sleep(self.load_s)


class WhichProcess:
    """A job that writes the id of the process it runs in to ``out/<key>.pid`` (and prints a line to
    its log); ``die``: then kills that process, as a crash in native code would."""

    def __init__(self, out, key, die=False):
        self.out, self.key, self.die = str(out), key, die

    def __call__(self):
        (Path(self.out) / f"{self.key}.pid").write_text(str(os.getpid()))
        print(f"job {self.key} in process {os.getpid()}", flush=True)
        if self.die:
            os.kill(os.getpid(), 9)


def expected_value(key, epochs, start=1):
    """The value a Toy run ends with, computed without running it."""
    value = start
    for epoch in range(epochs):
        value = (value * 31 + epoch + len(key)) % 1_000_003
    return value


def spans(out, key):
    """[(start, end, CUDA_VISIBLE_DEVICES)] of the finished attempts of a Toy run."""
    lines = (Path(out) / f"{key}.spans").read_text().split("\n")
    return [(float(a), float(b), c) for a, b, c in (line.split() for line in lines if line)]


def max_overlap(intervals):
    """Most intervals open at one time."""
    events = sorted([(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals])
    most = now = 0
    for _, step in events:
        now += step
        most = max(most, now)
    return most


def is_done_in(out):
    """The is_done the engine would pass: a run is done when its result file exists."""
    return lambda key: (Path(out) / f"{key}.json").exists()


class AllReduce:
    """A two-process torch.distributed check: each task joins the process group the runner's
    environment describes (gloo) and all-reduces rank + 1; rank 0 writes the sum."""

    def __init__(self, out, key):
        self.out, self.key = str(out), key

    def __call__(self):
        import torch
        import torch.distributed as dist

        from quadnn_paper.engine.distributed import init_distributed

        assert init_distributed("cpu")
        total = torch.tensor([float(dist.get_rank() + 1)])
        dist.all_reduce(total)
        if dist.get_rank() == 0:
            _write(Path(self.out) / f"{self.key}.json", {"sum": total.item(), "world": dist.get_world_size()})
        dist.destroy_process_group()


def fails_once(marker: str) -> str:
    """A computation (``slurm_fixture:fails_once``) whose first attempt dies without a result, as a
    job on a lost node would, and whose next attempt succeeds."""
    if not Path(marker).exists():
        Path(marker).write_text("attempted")
        raise RuntimeError("the first attempt dies")
    return "second attempt"
