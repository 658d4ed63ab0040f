"""Readable names and units of the metrics recipes log, for the pages and the curves.

A recipe logs short keys (``acc``, ``mask_mass_hop1``, ``cost_len40``); the pages show each as words with
its unit (``accuracy`` in %, ``share of the map on the object, hop 1`` in %, ``cost, length 40`` in bits
per sequence). A key no rule knows is shown as it is.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Metric:
    """How one metric reads: its name in words, its unit, and the factor from the logged value to that unit."""

    name: str
    unit: str = ""
    scale: float = 1.0  # a fraction logged as 0.838 shows as 83.8 %

    @property
    def label(self) -> str:
        """The name with its unit, as a column or an axis is titled: ``accuracy (%)``."""
        return f"{self.name} ({self.unit})" if self.unit else self.name

    def format(self, value: float) -> str:
        """``value`` in this metric's unit: ``83.8 %``, ``0.602 bits per sequence``, ``64,949``.

        Example:
            >>> describe_metric("acc").format(0.838)
            '83.8 %'
        """
        if not math.isfinite(value):
            return str(value)
        shown = value * self.scale
        if self.unit == "%":
            return f"{shown:.4g} %"
        text = f"{shown:,.0f}" if shown == int(shown) and abs(shown) >= 1000 else f"{shown:.4g}"
        return f"{text} {self.unit}" if self.unit else text


NATS = "nats"
PER_IMAGE = "nats per image"

# Keys whose name is fixed: (name, unit, scale).
EXACT: dict[str, tuple[str, str, float]] = {
    "acc": ("accuracy", "%", 100.0),
    "error": ("classification error", "%", 1.0),  # the classifiers log it as a percentage already
    "loss": ("loss", "", 1.0),  # each recipe's own objective, not always in one unit
    "ce": ("cross-entropy", NATS, 1.0),
    "lr": ("learning rate", "", 1.0),
    "params": ("trainable parameters", "", 1.0),
    "mask_mass": ("share of the map on the object", "%", 100.0),
    "bits": ("wrong bits per sequence", "", 1.0),
    "bit_error": ("bit error rate", "%", 100.0),
    "bce": ("binary cross-entropy", "nats per bit", 1.0),
    "cost": ("cost", "bits per sequence", 1.0),
    "length": ("sequence length", "steps", 1.0),
    "level": ("curriculum level", "", 1.0),
    "neg_elbo": ("negative ELBO", PER_IMAGE, 1.0),
    "nll": ("reconstruction NLL", PER_IMAGE, 1.0),
    "nll_recon": ("reconstruction NLL", PER_IMAGE, 1.0),
    "kl": ("KL divergence", PER_IMAGE, 1.0),
    "iwae_nll": ("importance-weighted NLL bound", PER_IMAGE, 1.0),
    "iwae_sample_elbo": ("ELBO of the importance samples", PER_IMAGE, 1.0),
    "iwae_k": ("importance samples per image", "", 1.0),
    "iwae_images": ("images scored by importance sampling", "", 1.0),
    "reward": ("REINFORCE's reward, mean", "", 1.0),  # 1[right], the label's probability or its log (ram_loss)
    "on_object": ("glimpses centred on the object", "%", 100.0),
    "reinforce": ("REINFORCE loss", "", 1.0),
    "baseline_mse": ("baseline's squared error", "", 1.0),
    "compile_s": ("compile time", "s", 1.0),
    "skipped": ("steps skipped (not finite)", "", 1.0),
}

WORDS = {"yesno": "yes/no", "non_relational": "non-relational", "one_hop": "one-hop", "two_hop": "two-hop"}
# Question groups whose name does not read as "<words> questions".
QUESTIONS = {
    "yesno_present": "yes/no questions about a shape that is there",
    "yesno_absent": "yes/no questions about a shape that is not there",
}


def _questions(part: str) -> str:
    """A group of questions in words: ``yesno`` -> ``yes/no questions``."""
    return QUESTIONS.get(part) or f"{in_words(part)} questions"


def in_words(part: str) -> str:
    """A key's tail in words: ``non_relational`` -> ``non-relational``, ``len10_rep3`` -> ``length 10, 3 repeats``.

    Example:
        >>> in_words("items6")
        '6 items'
    """
    for key, words in WORDS.items():
        part = part.replace(key, words)
    part = re.sub(r"len(\d+)", r"length \1", part)
    part = re.sub(r"_?rep(\d+)", r", \1 repeats", part)
    part = re.sub(r"items(\d+)", r"\1 items", part)
    return part.replace("_", " ")


def describe_metric(key: str) -> Metric:
    """The :class:`Metric` of a logged key; the key itself, with no unit, if no rule knows it.

    Example:
        >>> describe_metric("mask_mass_hop1").label
        'share of the map on the object, hop 1 (%)'
        >>> describe_metric("bits_len40").label
        'wrong bits per sequence, length 40'
    """
    if key in EXACT:
        return Metric(*EXACT[key])
    if match := re.fullmatch(r"acc_template_(.+)", key):
        return Metric(f"accuracy, {_questions(match[1])}", "%", 100.0)
    if match := re.fullmatch(r"mask_mass_hop(\d+)", key):
        return Metric(f"share of the map on the object, hop {match[1]}", "%", 100.0)
    if match := re.fullmatch(r"(acc|mask_mass)_(.+)", key):
        return Metric(f"{EXACT[match[1]][0]}, {_questions(match[2])}", "%", 100.0)
    if match := re.fullmatch(r"mass_(?:(.+)_)?hop(\d+)_(\w+?)", key):
        family = f", {_questions(match[1])}" if match[1] else ""
        return Metric(f"share of hop {match[2]}'s map on the {match[3]} object{family}", "%", 100.0)
    if match := re.fullmatch(r"mass_(?:(.+)_)?uniform_(\w+?)", key):
        family = f", {_questions(match[1])}" if match[1] else ""
        return Metric(f"share of a uniform map on the {match[2]} object{family}", "%", 100.0)
    if match := re.fullmatch(r"(bits|cost)_(.+)", key):
        name, unit, scale = EXACT[match[1]]
        return Metric(f"{name}, {in_words(match[2])}", unit, scale)
    return Metric(key)


def format_metric(key: str, value: object) -> str:
    """``value`` of metric ``key`` in its unit (:meth:`Metric.format`); a value that is no number as it is.

    Example:
        >>> format_metric("error", 14.34), format_metric("params", 64949.0)
        ('14.34 %', '64,949')
    """
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    return describe_metric(key).format(float(value))
