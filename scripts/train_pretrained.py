"""Train every model foveal ships and write ``src/foveal/weights/NAME/`` (weights, card and test sample).

    python scripts/train_pretrained.py                 # all of them, one thread, one after another
    python scripts/train_pretrained.py ntm-copy stn    # only these
    python scripts/train_pretrained.py easy-vqa --from runs/sweeps/easy-vqa-full/default-seed0
                                                       # ship a finished run of the same command

Each model is declared by its card, ``src/foveal/weights/NAME/card.json`` (:class:`foveal.shipped.Card`):
the command that trains it, the overrides of its check and what its figures show. This script runs the
command by the one loop and writes the rest of the card: the full evaluation, and the check, the
evaluation on a small subset that ``tests/test_zoo.py`` reproduces from the shipped weights.
"""

from __future__ import annotations

import argparse
import shlex
import sys

import torch

from foveal.cli import main as foveal
from foveal.zoo import Check, available, build, card, save, save_card, training


def check(name: str) -> Check:
    """Evaluate the stored weights on the card's check sets, through the path the test takes."""
    from foveal.train import evaluate

    light = card(name).check["sets"]
    _, _, task = build(name, light)
    return Check(sets=light, metrics=evaluate(task, task.model))


def make(name: str, out: str) -> None:
    """Run the card's command, as `foveal train` runs it, and ship the run it makes."""
    training(name)  # a command of another form is refused before anything is trained
    run_dir = f"{out}/{name}"
    if foveal([*shlex.split(card(name).command)[1:], "--out", run_dir, "--overwrite"]):
        sys.exit(f"{name}: `{card(name).command}` failed")
    ship(name, run_dir)


def ship(name: str, run_dir: str) -> None:
    """Ship a finished run instead of training again: it must be the run the card's command makes."""
    import json
    from pathlib import Path

    from foveal.runs import holds_this_run, load_run
    from foveal.train import evaluate

    declared = training(name)
    if not holds_this_run(run_dir, declared.recipe, declared.preset, declared.sets, declared.seed):
        sys.exit(f"{run_dir} is not a run of `{card(name).command}` (its saved config differs); train it instead")
    run = load_run(run_dir)
    info = json.loads((Path(run_dir) / "run.json").read_text())
    metrics = evaluate(run.task, run.task.model)
    # CPU time where the run recorded it: waiting for a core on a busy machine does not count
    seconds = info.get("cpu_seconds", info["seconds"])
    save(name, run, metrics, seconds)
    # The check is measured on the weights as stored, so they are written first, then the card again.
    save_card(card(name), check=check(name))
    print(f"{name}: shipped {run_dir}, {seconds:.0f} CPU s, {metrics}", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help=f"which to train (default: all of {', '.join(available())})")
    parser.add_argument("--out", default="runs/pretrained", help="where the training runs go")
    parser.add_argument("--recheck", action="store_true", help="measure the check again (no training)")
    parser.add_argument("--from", dest="run_dir", help="ship this finished run of the one name given instead")
    args = parser.parse_args()
    unknown = set(args.names) - set(available())
    if unknown:
        parser.error(f"unknown {', '.join(sorted(unknown))}; declare it in src/foveal/weights/NAME/card.json first")
    torch.set_num_threads(1)
    if args.run_dir:
        if len(args.names) != 1:
            parser.error("--from ships one run: name exactly one model")
        ship(args.names[0], args.run_dir)
        return 0
    for name in args.names or available():
        if args.recheck:
            save_card(card(name), check=check(name))
        else:
            make(name, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
