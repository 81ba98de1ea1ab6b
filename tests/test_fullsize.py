"""Full-size data through the engine: a CIFAR-10 of the real size, written in the
real on-disk format, loaded under a memory bound and trained for one whole epoch on the CPU at a
small width. Minutes: run by `make test-fullsize` (and test-e2e), not by `make test`."""

import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.fullsize

EPOCH = """
import json, resource, sys
from pathlib import Path
from quadnn_paper.data import tiny
from quadnn_paper.engine import RunConfig, run
vm = int(open("/proc/self/status").read().split("VmSize:")[1].split()[0]) * 1024
resource.setrlimit(resource.RLIMIT_AS, (vm + BOUND, vm + BOUND))
root = Path(sys.argv[1])
tiny.write_cifar(root / "data", "cifar10", 50000, 10000)
cfg = RunConfig(model="cifar_qresnet20", width=0.125, dataset="cifar10", data_dir=str(root / "data"), epochs=1,
                relinear="sg", device="cpu", threads=2, progress=False)
res = run(cfg, root / "runs")
h = res["history"][-1]
print(json.dumps(dict(status=res["status"], epoch_time=h["epoch_time"], test_error=res.get("test_error"))))
"""


def test_one_engine_epoch_over_a_full_size_cifar10_on_the_cpu(tmp_path):
    env = dict(os.environ, OMP_NUM_THREADS="2")
    code = EPOCH.replace("BOUND", str(4 << 30))  # the data as float on the host, the model, 4 GiB in all
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    row = json.loads(done.stdout.strip().splitlines()[-1])
    assert row["status"] == "finished" and row["test_error"] is not None, row
    print(row)  # the seconds of one epoch of 391 steps, for the log
