import pytest
import torch

from foveal.train import task


@pytest.fixture(autouse=True)
def _one_thread_and_seed(monkeypatch):
    # One thread, also where a config asks for every core (threads=0): fastest and steadiest on a shared
    # 2-core machine, and what several test processes side by side need.
    monkeypatch.setattr(task, "available_cores", lambda: 1)
    torch.set_num_threads(1)
    torch.manual_seed(0)
    yield
