"""What a model's answers to the ``shapes`` questions score: accuracy per template and family, and on
the two-hop set where each hop looks (its map's mass on the cells each of the question's objects touches)."""

from __future__ import annotations

import torch
from torch import Tensor

from foveal.data.shapes import OBJECT_ROLES, ShapesVQA


class ShapesScores:
    """Sums a split's scores batch by batch; :meth:`metrics` gives the means.

    Args:
        data: the split the questions come from (its templates and families name the metrics).
    """

    def __init__(self, data: ShapesVQA) -> None:
        self.data = data
        self.correct, self.count = torch.zeros(len(data.templates)), torch.zeros(len(data.templates))
        families = len(data.families)
        self.mass: Tensor | None = None  # (families, hops, roles)
        self.uniform, self.counted = torch.zeros(families, len(OBJECT_ROLES)), torch.zeros(families)

    def add(self, template: Tensor, right: Tensor) -> None:
        """Count answers: ``right`` is 1 where the answer to a question of ``template`` was right.

        Shape:
            - template: int64 ``(Q,)``; right: float ``(Q,)``
        """
        self.correct.index_add_(0, template, right)
        self.count.index_add_(0, template, torch.ones_like(right))

    def add_maps(self, family: Tensor, maps: Tensor, cells: Tensor) -> None:
        """Sum each hop's mass on the cells each object touches, and a uniform map's.

        Shape:
            - family: int64 ``(Q,)``
            - maps: ``(Q, hops, N)``, each hop's weights over the ``N`` grid cells
            - cells: ``(Q, 3, N)``, 1 on the cells each object (:data:`OBJECT_ROLES` order) touches
        """
        families = len(self.data.families)
        on = torch.einsum("qkn,qrn->qkr", maps, cells)  # (Q, hops, 3)
        summed = torch.zeros(families, *on.shape[1:]).index_add_(0, family, on)
        self.mass = summed if self.mass is None else self.mass + summed
        self.uniform.index_add_(0, family, cells.mean(-1))
        self.counted += torch.bincount(family, minlength=families).float()

    def metrics(self) -> dict[str, float]:
        """``acc``; ``acc_FAMILY`` and ``acc_template_NAME`` for those asked; after :meth:`add_maps`,
        ``mass_hopK_ROLE`` and ``mass_uniform_ROLE`` over the two-hop questions and ``mass_FAMILY_...``
        over another family's."""
        data, correct, count = self.data, self.correct, self.count
        metrics = {"acc": (correct.sum() / count.sum()).item()}
        family_of = torch.from_numpy(data.question_set.template_family)
        for f, name in enumerate(data.families):
            if count[family_of == f].sum():
                mine = family_of == f
                metrics[f"acc_{name.replace('-', '_')}"] = (correct[mine].sum() / count[mine].sum()).item()
        metrics |= {
            f"acc_template_{t.name}": (correct[i] / count[i]).item() for i, t in enumerate(data.templates) if count[i]
        }
        if self.mass is None:
            return metrics
        for f, name in enumerate(data.families):
            if not self.counted[f]:
                continue
            prefix, n = ("mass_" if name == "two-hop" else f"mass_{name.replace('-', '_')}_"), self.counted[f]
            for k in range(self.mass.shape[1]):
                metrics |= {
                    f"{prefix}hop{k + 1}_{role}": (self.mass[f, k, r] / n).item() for r, role in enumerate(OBJECT_ROLES)
                }
            metrics |= {
                f"{prefix}uniform_{role}": (self.uniform[f, r] / n).item() for r, role in enumerate(OBJECT_ROLES)
            }
        return metrics
