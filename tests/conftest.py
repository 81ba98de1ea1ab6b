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
        if "slurm" in getattr(item, "fixturenames", ()) or "slurm_cluster" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.slurm)
        if item.path.suffix == ".ipynb":
            item.add_marker(pytest.mark.notebook)
        if item.path.name == "test_paper.py":
            item.add_marker(pytest.mark.pdf)


def pytest_configure(config):
    config.quadnn_started = time.time()  # test_paper: outputs written by nbval in this session only
