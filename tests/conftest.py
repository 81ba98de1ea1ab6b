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
