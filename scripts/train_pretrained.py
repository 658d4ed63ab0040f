"""Train every model foveal ships and write ``src/foveal/weights/NAME/`` (weights, card and test sample).

    python scripts/train_pretrained.py                 # all of them, one thread, one after another
    python scripts/train_pretrained.py ntm-copy stn    # only these
    python scripts/train_pretrained.py easy-vqa --from runs/sweeps/easy-vqa-full/default-seed0
                                                       # ship a finished run of the same command

Each entry is a recipe, a preset and a few overrides, trained with seed 0 by the one loop; the
card records the full evaluation, and a check: the evaluation on a small subset that
``tests/test_zoo.py`` reproduces from the shipped weights.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time

import torch

from foveal.runs import start_run
from foveal.zoo import build, card, save, save_card

# name: (recipe, preset, overrides, the "light" overrides: small train and test sets, so that the
# check and `foveal demo` build the task in seconds)
ENTRIES: dict[str, tuple[str, str, dict[str, str], dict[str, str]]] = {
    # The recipe's default model: one sharpened hop whose map sits inside the shape (docs/vqa.md).
    "easy-vqa": ("easy-vqa", "full", {}, {"train_limit": "64", "eval_limit": "300"}),
    "shapes-vqa": ("shapes-vqa", "quick", {"loop.steps": "3000"}, {"n_images": "16", "eval_images": "40"}),
    # The ST-CNN of the STN paper's comparison on RTS (docs/stn.md); a sweep's seed-0 run ships with --from.
    "stn": (
        "stn",
        "paper",
        {"data.dataset": "fashion-mnist", "distortion": "RTS", "model.name": "stcnn"},
        {"data.n_train": "64", "data.n_test": "300"},
    ),
    "ram": ("ram", "quick", {"loop.steps": "6000"}, {"data.n_train": "64", "data.n_test": "300"}),
    # The attention arm of DRAW's comparison on MNIST 5k (docs/draw.md); a sweep's seed-0 run ships with --from.
    "draw": ("draw", "compare", {}, {"train_limit": "64", "test_limit": "200", "iwae_images": "20", "iwae_k": "10"}),
    "ntm-copy": ("ntm-copy", "full", {}, {"n_eval": "100", "generalise_lengths": "40,120", "n_eval_long": "20"}),
}


def command(name: str) -> str:
    recipe, preset, sets, _ = ENTRIES[name]
    flags = " ".join(f"--set {shlex.quote(f'{k}={v}')}" for k, v in sets.items())
    return f"foveal train {recipe} --preset {preset} {flags} --seed 0 --threads 1".replace("  ", " ")


def check(name: str) -> dict[str, object]:
    """Evaluate the stored weights on the light sets, through the path the test takes."""
    from foveal.train import evaluate

    light = ENTRIES[name][3]
    _, _, task = build(name, light)
    return {"sets": light, "metrics": evaluate(task, task.model)}


def make(name: str, out: str) -> None:
    recipe, preset, sets, check_sets = ENTRIES[name]
    start = time.process_time()  # CPU time: waiting for a core on a busy machine does not count
    run, metrics = start_run(recipe, preset, sets=sets, seed=0, threads=1, out=f"{out}/{name}", overwrite=True)
    seconds = time.process_time() - start
    # The check is measured on the weights as stored, so they are written first, then the card again.
    save(name, run, metrics, {"sets": check_sets, "metrics": {}}, command(name), seconds)
    save_card(card(name), check=check(name))
    print(f"{name}: {seconds:.0f} s, {metrics}", flush=True)


def ship(name: str, run_dir: str) -> None:
    """Ship a finished run instead of training again: it must be the run the entry's command makes."""
    import json
    from pathlib import Path

    from foveal.runs import holds_this_run, load_run
    from foveal.train import evaluate

    recipe, preset, sets, _ = ENTRIES[name]
    if not holds_this_run(run_dir, recipe, preset, sets, 0):
        sys.exit(f"{run_dir} is not a run of `{command(name)}` (its saved config differs); train it instead")
    run = load_run(run_dir)
    info = json.loads((Path(run_dir) / "run.json").read_text())
    metrics = evaluate(run.task, run.task.model)
    seconds = info.get("cpu_seconds", info["seconds"])  # CPU time where the run recorded it
    save(name, run, metrics, {"sets": ENTRIES[name][3], "metrics": {}}, command(name), seconds)
    save_card(card(name), check=check(name))
    print(f"{name}: shipped {run_dir}, {metrics}", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help=f"which to train (default: all of {', '.join(ENTRIES)})")
    parser.add_argument("--out", default="runs/pretrained", help="where the training runs go")
    parser.add_argument(
        "--recheck", action="store_true", help="measure the check again and rewrite the command (no training)"
    )
    parser.add_argument("--from", dest="run_dir", help="ship this finished run of the one name given instead")
    args = parser.parse_args()
    unknown = set(args.names) - ENTRIES.keys()
    if unknown:
        parser.error(f"unknown {', '.join(sorted(unknown))}; choose from: {', '.join(ENTRIES)}")
    torch.set_num_threads(1)
    if args.run_dir:
        if len(args.names) != 1:
            parser.error("--from ships one run: name exactly one model")
        ship(args.names[0], args.run_dir)
        return 0
    for name in args.names or ENTRIES:
        if args.recheck:
            save_card(card(name), check=check(name), command=command(name))
        else:
            make(name, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
