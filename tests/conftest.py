import pytest
import torch


@pytest.fixture(autouse=True)
def _one_thread_and_seed():
    # One thread: fastest and steadiest on a shared 2-core machine.
    torch.set_num_threads(1)
    torch.manual_seed(0)
    yield
