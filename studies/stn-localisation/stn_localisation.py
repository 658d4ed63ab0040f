"""Does the ST-CNN's localisation net learn on cluttered canvases, and what keeps it alive?

    python studies/stn-localisation/stn_localisation.py --pool avg --out runs/stn-loc/avg-s0
    python studies/stn-localisation/stn_localisation.py --pool max --seed 1 --out runs/stn-loc/max-s1
    python studies/stn-localisation/stn_localisation.py --diagnose runs/stn-loc/avg-s0 --pool avg

Trains the ``stn`` recipe's ST-CNN (``--preset paper``, cluttered Fashion-MNIST, the first 2,000 test images)
with one change to its localisation net: the pool that reduces its last features to 4 x 4 (``--pool avg`` is
the average the net used to take, ``max`` its maximum), its nonlinearity (``--leaky``: LeakyReLU 0.01 in place
of every ReLU) and its learning rate as a fraction of the loop's (``--loc-lr``, a second parameter group).
``--diagnose RUN`` loads a trained run with the same options and prints, for 300 test canvases, the share of
each ReLU layer's outputs above zero, and the spread of the transform over the canvases (zero: the net's
output no longer depends on its input).
"""

from __future__ import annotations

import argparse

import torch
from torch import nn

import foveal.train.loop as loop_module
from foveal.runs import RunRequest, load_run, start_run


def localisation_net(model: nn.Module) -> nn.Sequential:
    return next(m for m in model.transformer.modules() if isinstance(m, nn.Sequential))


def apply(model: nn.Module, pool: str, leaky: bool) -> None:
    """Give the ST-CNN's localisation net the study's pool and nonlinearity (the weights are unchanged)."""
    net = localisation_net(model)
    for i, layer in enumerate(net):
        if isinstance(layer, nn.AdaptiveMaxPool2d | nn.AdaptiveAvgPool2d):
            net[i] = nn.AdaptiveMaxPool2d(4) if pool == "max" else nn.AdaptiveAvgPool2d(4)
        elif isinstance(layer, nn.ReLU) and leaky:
            net[i] = nn.LeakyReLU(0.01)


def train(args: argparse.Namespace) -> None:
    build_optimizer, trainer_init = loop_module.build_optimizer, loop_module.Trainer.__init__
    localisation: set[int] = set()

    def init(self, task, config, device=None):  # type: ignore[no-untyped-def]
        apply(task.model, args.pool, args.leaky)
        localisation.update(id(p) for p in task.model.transformer.parameters())
        trainer_init(self, task, config, device)

    def optimizer(params, loop):  # type: ignore[no-untyped-def]
        params = list(params)
        opt = build_optimizer([p for p in params if id(p) not in localisation], loop)
        opt.add_param_group({"params": [p for p in params if id(p) in localisation], "lr": loop.lr * args.loc_lr})
        return opt

    loop_module.Trainer.__init__ = init  # type: ignore[method-assign]
    loop_module.build_optimizer = optimizer
    # the net as it was before batch normalisation, which this study's rows measure (--set model.loc_norm true: today's)
    sets = {
        "distortion": "cluttered",
        "model.name": "stcnn",
        "model.loc_norm": "false",
        "data.n_test": "2000",
        **dict(args.set),
    }
    _, metrics = start_run(
        RunRequest("stn", "paper", sets=sets, seed=args.seed, threads=1, out=args.out, overwrite=True)
    )
    print(metrics)


def diagnose(args: argparse.Namespace) -> None:
    run = load_run(args.diagnose)
    model = run.task.model.eval()
    apply(model, args.pool, args.leaky)
    images = run.task.evaluation_set().images[:300].float() / 255
    with torch.no_grad():
        h = images
        for i, layer in enumerate(localisation_net(model)):
            h = layer(h)
            if isinstance(layer, nn.ReLU | nn.LeakyReLU):
                print(f"layer {i} ({type(layer).__name__}): {float((h > 0).float().mean()):.3f} of outputs above 0")
        theta = model(images).theta
    print(
        "transform's spread over the canvases (std of each parameter):",
        [round(float(s), 4) for s in theta.std(0).flatten()],
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pool", choices=("avg", "max"), default="max")
    parser.add_argument("--leaky", action="store_true", help="LeakyReLU(0.01) in place of the net's ReLUs")
    parser.add_argument("--loc-lr", type=float, default=1.0, help="the net's learning rate over the loop's")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--set", nargs=2, action="append", default=[], metavar=("KEY", "VALUE"))
    parser.add_argument("--out", default="runs/stn-loc/run")
    parser.add_argument("--diagnose", metavar="RUN", help="print a trained run's localisation net instead")
    args = parser.parse_args()
    torch.set_num_threads(1)
    diagnose(args) if args.diagnose else train(args)


if __name__ == "__main__":
    main()
