"""Write what makes each shipped model stand on its own, from its recipe: no training.

    python scripts/describe_pretrained.py              # every model in src/foveal/weights/
    python scripts/describe_pretrained.py stn ram      # only these

For each model it builds the recipe's task as the card records it (so the data sets must be on this
machine), then writes into ``card.json`` the ``model`` entry (registered name, constructor arguments,
spec), the ``preprocessing`` and the ``labels`` (:mod:`foveal.artifact`), and cuts
``sample.safetensors``, the few held-out test examples ``foveal demo`` draws. The weights are not
touched. ``scripts/train_pretrained.py`` writes the same when it trains a model.
"""

from __future__ import annotations

import sys

from foveal.artifact import describe_model
from foveal.zoo import available, build, card, describe, save_card, write_sample


def main(names: list[str]) -> None:
    for name in names or available():
        entry = card(name)
        recipe, config, task = build(name, entry.check["sets"])
        save_card(entry, model=describe_model(task.model), **describe(recipe, config, task))
        path = write_sample(name, recipe, config, task)
        size = f"{path.stat().st_size / 1024:.0f} KB sample" if path else "no sample (its recipe cuts none)"
        print(f"{name}: card written, {size}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
