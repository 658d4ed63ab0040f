"""Where a trained RAM's glimpses go, step by step, and what it would score looking at the object.

    python studies/ram-policy/probe.py RUN_DIR [RUN_DIR ...]
    python studies/ram-policy/probe.py --gradient RUN_DIR [--std 0.3]

For each run, on the first 2,000 test canvases: the test error and on-object fraction with its own
(mean) glimpses; per step and per class, the fraction on the object, and per step the fraction at the
canvas edge (|x| or |y| > 0.9); the error when every glimpse after the first is sent to the object (its
centre, then +-6 px around it) and to a corner; and per step, how far the policy's mean lands from the
object's centre against how far a least-squares linear read-out of the same state lands (fitted on 1,500
canvases, scored on the other 500): the state knows where the object is when the read-out lands close.

``--gradient`` instead asks where REINFORCE pushes the trained policy: over 200 training-mode batches of
64 test canvases, the locator's REINFORCE gradient for each reward (1[right], the label's probability,
its log; batch-mean baseline), and the cosine of its mean with the gradient that would pull every
step's mean onto the object's centre (1: REINFORCE points at the object; 0: no direction in common).
"""

from __future__ import annotations

import argparse
import json
import types

import torch

from foveal.models.ram import glimpses_on_object
from foveal.runs import load_run


def probe(run_dir: str, limit: int = 2000) -> dict[str, object]:
    run = load_run(run_dir)
    model = run.task.model.eval()
    test = run.task.evaluation_set()
    x, y, boxes = test.images[:limit].float() / 255, test.labels[:limit], test.boxes[:limit]
    size = tuple(x.shape[-2:])
    with torch.no_grad():
        out = model(x)
    steps = out.locations.shape[1]
    row: dict[str, object] = {
        "run": run_dir,
        "error": round(100 * (out.logits.argmax(-1) != y).float().mean().item(), 2),
        "on_object": round(glimpses_on_object(out.locations, boxes, size).mean().item(), 3),
        "on_object_by_step": [
            round(glimpses_on_object(out.locations[:, t : t + 1], boxes, size).mean().item(), 3) for t in range(steps)
        ],
        "edge_by_step": [round(v, 3) for v in (out.locations.abs() > 0.9).any(-1).float().mean(0).tolist()],
    }
    on = glimpses_on_object(out.locations, boxes, size)
    names = run.recipe.describe(run.config, run.task)["labels"]["classes"] if run.recipe.describe else None
    row["on_object_by_class"] = {
        (names[c] if names else str(c)): round(on[y == c].mean().item(), 3) for c in sorted(set(y.tolist()))
    }
    centre = ((boxes[:, :2] + boxes[:, 2:]) / 2 + 0.5) / torch.tensor(size[::-1]) * 2 - 1
    row |= readout_distances(model, x, centre, size[0] / 2)
    around = torch.tensor([[0, 0], [-6, -6], [6, -6], [-6, 6], [6, 6]]) / (size[0] / 2)
    locate = model.locator.forward

    def forced(target) -> float:
        count = {"t": 0}

        def locator(self, h):
            t = count["t"]
            count["t"] += 1
            return locate(h) if t == 0 else torch.atanh(target(t).clamp(-0.999, 0.999))

        model.locator.forward = types.MethodType(locator, model.locator)
        try:
            with torch.no_grad():
                logits = model(x).logits
        finally:
            model.locator.forward = locate
        return round(100 * (logits.argmax(-1) != y).float().mean().item(), 2)

    row["error_forced_on_object"] = forced(lambda t: centre + around[(t - 1) % len(around)])
    row["error_forced_corner"] = forced(lambda t: torch.full_like(centre, 0.95))
    return row


def readout_distances(model, x: torch.Tensor, centre: torch.Tensor, half: float) -> dict[str, list[float]]:
    """Per step: the policy mean's and a fitted linear read-out's mean distance (px) to the object's centre."""
    states: list[torch.Tensor] = []
    locate = model.locator.forward
    model.locator.forward = lambda h: (states.append(h.detach()), locate(h))[1]
    try:
        with torch.no_grad():
            model(x)
    finally:
        model.locator.forward = locate
    fit, test = slice(0, 1500), slice(1500, len(x))
    policy, linear = [], []
    for h in states[1:]:  # the first glimpse is chosen from the zero state: nothing to read
        features = torch.cat([h, torch.ones(len(h), 1)], 1)
        weights = torch.linalg.lstsq(features[fit], centre[fit]).solution
        linear.append(round(((features[test] @ weights - centre[test]).norm(dim=1).mean() * half).item(), 1))
        mean = torch.tanh(locate(h[test]))
        policy.append(round(((mean - centre[test]).norm(dim=1).mean() * half).item(), 1))
    return {"policy_px_by_step": policy, "readout_px_by_step": linear}


def gradient_alignment(run_dir: str, std: float | None, batches: int = 200) -> dict[str, float]:
    """Cosine of the mean REINFORCE gradient of ``locator.weight`` with the go-to-the-object gradient, per reward."""
    torch.manual_seed(0)
    model = load_run(run_dir).task.model.train()
    model.std = model.std if std is None else std
    test = load_run(run_dir).task.evaluation_set()
    x_all, y_all, boxes = test.images.float() / 255, test.labels, test.boxes
    centres = ((boxes[:, :2] + boxes[:, 2:]) / 2 + 0.5) / torch.tensor(x_all.shape[-2:][::-1]) * 2 - 1
    weight, locate = model.locator.weight, model.locator.forward
    sums: dict[str, torch.Tensor] = {}
    pull = torch.zeros_like(weight)
    for _ in range(batches):
        pick = torch.randint(0, len(y_all), (64,))
        states: list[torch.Tensor] = []
        model.locator.forward = lambda h, seen=states: (seen.append(h), locate(h))[1]
        try:
            out = model(x_all[pick])
        finally:
            model.locator.forward = locate
        log_p = out.logits.log_softmax(-1).gather(1, y_all[pick][:, None]).detach()
        correct = (out.logits.argmax(-1) == y_all[pick]).float()[:, None]
        for name, reward in {"correct": correct, "probability": log_p.exp(), "log-probability": log_p}.items():
            advantage = (reward - reward.mean()).expand_as(out.log_probs)
            (grad,) = torch.autograd.grad(-(out.log_probs * advantage).sum(1).mean(), weight, retain_graph=True)
            sums[name] = sums.get(name, torch.zeros_like(weight)) + grad
        means = torch.stack([torch.tanh(locate(h.detach())) for h in states[1:]], 1)
        (grad,) = torch.autograd.grad(((means - centres[pick][:, None]) ** 2).sum(-1).mean(), weight)
        pull += grad
    cosine = torch.nn.functional.cosine_similarity
    return {name: round(cosine(g.flatten(), pull.flatten(), dim=0).item(), 3) for name, g in sums.items()}


if __name__ == "__main__":
    torch.set_num_threads(1)
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+")
    parser.add_argument("--gradient", action="store_true", help="where REINFORCE pushes the policy, per reward")
    parser.add_argument("--std", type=float, default=None, help="--gradient: the std (default: the run's)")
    args = parser.parse_args()
    for path in args.runs:
        row = {"run": path, "std": args.std, **gradient_alignment(path, args.std)} if args.gradient else probe(path)
        print(json.dumps(row))
