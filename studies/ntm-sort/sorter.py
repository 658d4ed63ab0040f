"""What the ntm-sort scripts share: a perfect sorter that sees noisy priorities, and one evaluation set.

``ntm_sort_floor.py`` asks how precise a sorter must be; ``ntm_sort_probe.py`` finds the noise at
which the sorter errs as much as a trained model; ``ntm_sort_vs_lstm.py`` and the probe score models
on the same 500 sequences.
"""

from __future__ import annotations

import torch

from foveal.data.ntm_tasks import NTMBatch, PrioritySort

EVAL_SEQUENCES, EVAL_SEED = 500, 12345


def evaluation_set(task: PrioritySort) -> NTMBatch:
    """The 500 sequences every sort study scores a model on (independent of the training seed)."""
    return task.sample(EVAL_SEQUENCES, torch.Generator().manual_seed(EVAL_SEED))


def noisy_sort_errors(batch: NTMBatch, task: PrioritySort, noise: torch.Tensor, sigma: float) -> torch.Tensor:
    """Wrong bits at each output step of ``batch`` sorted perfectly by ``priority + sigma * noise``.

    Shape:
        noise: ``(B, n_in)``, standard normal draws (fixed, so that ``sigma`` can be swept).
        returns: ``(B, n_out)``.
    """
    items = batch.inputs[:, : task.n_in, : task.width]
    noisy = batch.inputs[:, : task.n_in, task.width] + sigma * noise
    order = noisy.argsort(dim=1, descending=True)[:, : task.n_out]
    predicted = items.gather(1, order.unsqueeze(-1).expand(-1, -1, task.width))
    return (predicted != batch.targets).float().sum(dim=-1)
