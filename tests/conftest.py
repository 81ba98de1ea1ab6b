import os
import time

import pytest
import torch


@pytest.fixture(scope="module")
def one_thread():
    # Tiny tensors: a second intra-op thread only adds synchronisation (and, on a busy machine,
    # waiting for a core). Modules opt in with `pytestmark = pytest.mark.usefixtures("one_thread")`.
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


# Test tiers (Makefile): `make test-fast` runs the library and engine unit tests (-m "not slow and
# not slurm and not notebook and not pdf"); `make test` runs everything. Tests that need the real
# SLURM or build the PDF are marked here by the fixture/file they use, so no test is forgotten.
def pytest_collection_modifyitems(config, items):
    for item in items:
        names = getattr(item, "fixturenames", ())
        if "slurm" in names or "slurm_cluster" in names:
            item.add_marker(pytest.mark.slurm)
        if item.path.suffix == ".ipynb":
            item.add_marker(pytest.mark.notebook)
        if item.path.name == "test_paper.py":
            item.add_marker(pytest.mark.pdf)


# `make test` runs two pytest-xdist workers. Some tests must share one: the runner tests (they bring
# the one SLURM cluster up and pause its daemons, and mostly wait on them while the other worker
# computes), and the notebooks with the PDF test that builds from their outputs. xdist's own
# `xdist_group` marker is not seen under pytest 9 (it renames `item._nodeid`, which no longer makes
# the node id), so the groups are drawn here, from node ids, for a scheduler that sends each group to
# one worker in its collection order (the largest first) and every other test on its own.
SHARED_WORKER = {
    "tests/test_runners.py": "runners",
    "tests/test_execute.py": "runners",
    "notebooks": "paper",
    "tests/test_paper.py": "paper",
}


def shared_worker(nodeid: str) -> str:
    """The group of tests that ``nodeid`` runs with on one worker (its own id when none)."""
    path = nodeid.split("::")[0]
    for prefix, group in SHARED_WORKER.items():
        if path == prefix or path.startswith(prefix + "/"):
            return group
    return nodeid


try:
    from xdist.scheduler import LoadScopeScheduling
except ImportError:  # pytest-xdist is in the test extra; without it `pytest` alone still runs
    pass
else:

    class SharedWorkerScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid):
            return shared_worker(nodeid)

    def pytest_xdist_make_scheduler(config, log):
        return SharedWorkerScheduling(config, log)


def pytest_configure(config):
    if os.environ.get("PYTEST_XDIST_WORKER"):  # two workers on two cores: one intra-op thread each
        torch.set_num_threads(1)
    config.quadnn_started = time.time()  # test_paper: outputs written by nbval in this session only
