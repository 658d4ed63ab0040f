"""Pictures of a Neural Turing Machine at work, laid out like the NTM paper's figures 6-12.

Top row: the input sequence and the target next to the network's output (time runs left to
right, one row per channel). Middle row: the write and the read weightings over time (one row per
memory location; the paper's "location-based" diagonal lines for copy). Bottom row: the memory
after the last step, and the read weightings' mass per location. Only the memory locations that
any head touched are drawn, so a 128-row memory used for 20 steps is readable.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import Tensor, nn

from foveal.attention import record_maps
from foveal.data.ntm_eval import NTMEvalSet
from foveal.data.ntm_tasks import NTMBatch, wrong_bits
from foveal.viz._mpl import FIGURE_DPI, FONT, pyplot, save_figure


def used_rows(*weightings: Tensor, threshold: float = 0.01, margin: int = 2) -> Tensor:
    """The memory rows where any weighting exceeds ``threshold``, plus a margin: the shortest run of rows,
    in order around the memory, that holds them all.

    Addressing shifts circularly, so a head that starts on the last row and moves on to the first uses
    both ends of the memory: the run then wraps, ``[..., R - 1, 0, 1, ...]``, rather than spanning the
    unused middle.

    Shape:
        - each weighting: ``(T, R)``
        - output: ``(n,)`` row indices, ``n <= R``

    Example:
        >>> w = torch.zeros(4, 10); w[1, 3] = w[2, 5] = 1.0
        >>> used_rows(w, margin=1).tolist()
        [2, 3, 4, 5, 6]
        >>> w = torch.zeros(4, 10); w[1, 9] = w[2, 0] = 1.0
        >>> used_rows(w, margin=1).tolist()
        [8, 9, 0, 1]
    """
    mass = torch.stack([w.amax(dim=0) for w in weightings]).amax(dim=0)
    R = mass.numel()
    used = (mass > threshold).nonzero().flatten()
    if used.numel() == 0:
        return torch.arange(R)
    # the widest circular gap between used rows is what the run leaves out
    gaps = torch.diff(used, append=used[:1] + R)
    widest = int(gaps.argmax())
    span = R - int(gaps[widest]) + 1  # from the first used row after the gap to the last before it
    if span + 2 * margin >= R:
        return torch.arange(R)
    start = int(used[(widest + 1) % used.numel()]) - margin
    return (start + torch.arange(span + 2 * margin)) % R


def plot_ntm(
    inputs: Tensor,
    outputs: Tensor,
    targets: Tensor,
    write_weights: Tensor,
    read_weights: Tensor,
    memory: Tensor,
    path: str | Path,
    title: str = "",
) -> Path:
    """Draw one sequence's inputs, outputs, targets, weightings and final memory to ``path`` (PNG).

    Args:
        inputs: the input vectors.
        outputs: the output bits (sigmoid of the logits), every step.
        targets: the target of the last ``T_out`` steps.
        write_weights: the write head weighting of every step (sum the heads beforehand).
        read_weights: the read head weighting of every step (sum the heads beforehand).
        memory: the memory after the last step.
        path: the PNG to write.
        title: the figure's title.

    Shape:
        - inputs: ``(T, I)``; outputs: ``(T, O)``; targets: ``(T_out, O)``
        - write_weights, read_weights: ``(T, R)``; memory: ``(R, C)``

    Convention:
        Images are drawn with time on the x axis (left to right) and channels or memory
        locations on the y axis (top to bottom), as in the NTM paper.
    """
    from matplotlib.ticker import MaxNLocator

    plt = pyplot()

    T = inputs.shape[0]
    padded = torch.full((T, targets.shape[1]), float("nan"))
    padded[T - targets.shape[0] :] = targets
    rows = used_rows(write_weights, read_weights)

    fig, axes = plt.subplots(3, 2, figsize=(10, 7.5), gridspec_kw={"height_ratios": [1, 2, 2]})
    panels = [
        (axes[0, 0], inputs.T, "inputs", "channel", "Greys"),
        (
            axes[0, 1],
            torch.cat([padded.T, outputs.T], dim=0),
            "targets above the red line, outputs below",
            "channel",
            "Greys",
        ),
        (axes[1, 0], write_weights[:, rows].T, "write weightings", "location", "Greys"),
        (axes[1, 1], read_weights[:, rows].T, "read weightings", "location", "Greys"),
        (axes[2, 0], memory[rows], "memory after the last step", "location", "RdBu_r"),
    ]
    bar_labels = {"inputs": "bit", "memory after the last step": "value"}
    for ax, image, name, ylabel, cmap in panels:
        values = image.detach().cpu()
        # the memory's colours are centred on 0 (blue below, red above); the rest are bits and weights in [0, 1]
        top = float(values.nan_to_num().abs().max().clamp_min(1e-6))
        limits = {"vmin": 0, "vmax": 1} if cmap == "Greys" else {"vmin": -top, "vmax": top}
        shown = ax.imshow(values.numpy(), aspect="auto", interpolation="nearest", cmap=cmap, **limits)
        bar = ax.figure.colorbar(shown, ax=ax, fraction=0.04, pad=0.01)
        bar.set_label(bar_labels.get(name, "bit" if ylabel == "channel" else "weight"), fontsize=FONT)
        bar.ax.tick_params(labelsize=FONT)
        ax.set_title(name, fontsize=FONT + 1)
        ax.set_ylabel(ylabel, fontsize=FONT)
        ax.tick_params(labelsize=FONT)
    axes[0, 1].axhline(targets.shape[1] - 0.5, color="tab:red", linewidth=0.8)
    for whole in (axes[0, 0].yaxis, axes[0, 1].yaxis, axes[2, 0].xaxis):  # channels and columns are counted
        whole.set_major_locator(MaxNLocator(integer=True))
    for ax in axes[:2].flat:
        ax.set_xlabel("time", fontsize=FONT)
    axes[2, 0].set_xlabel("column", fontsize=FONT)
    # A head that parks on one row while the other head works puts a weight of about T there and about 1
    # on every row it passes: on a linear axis the ones vanish, on a log axis both show.
    ax = axes[2, 1]
    positions = torch.arange(len(rows)).numpy()
    for weights, name, colour in ((write_weights, "write", "tab:orange"), (read_weights, "read", "tab:blue")):
        total = weights[:, rows].sum(0).detach().cpu().clamp_min(1e-3).numpy()
        ax.plot(total, positions, drawstyle="steps-mid", color=colour, linewidth=1.0, label=name)
    ax.set_xscale("log")
    ax.set_ylim(len(rows) - 0.5, -0.5)
    # the rows shown may wrap around the memory's end: each tick is labelled with its row
    ticks = torch.linspace(0, len(rows) - 1, min(len(rows), 6)).round().long()
    for row_axis in (axes[1, 0], axes[1, 1], axes[2, 0], ax):
        row_axis.set_yticks(ticks.tolist())
        row_axis.set_yticklabels([str(int(rows[t])) for t in ticks])
    ax.set_title("weight summed over time (log scale)", fontsize=FONT + 1)
    ax.set_xlabel("summed weight", fontsize=FONT)
    ax.set_ylabel("location", fontsize=FONT)
    ax.legend(fontsize=FONT, loc="lower right")
    ax.tick_params(labelsize=FONT)
    if title:
        fig.suptitle(title, fontsize=FONT + 2)
    fig.tight_layout()
    return save_figure(fig, Path(path), dpi=FIGURE_DPI)


def show_ntm(model: nn.Module, dataset: NTMEvalSet, figures_dir: Path) -> list[Path]:
    """:func:`draw_ntm` of the evaluation set's examples (:meth:`~foveal.data.ntm_eval.NTMEvalSet.examples`)."""
    return draw_ntm(model, dataset.examples(), type(dataset.main.task).__name__, figures_dir)


def draw_ntm(model: nn.Module, examples: dict[str, NTMBatch], task: str, figures_dir: Path) -> list[Path]:
    """``ntm-NAME.png`` (:func:`plot_ntm`) per example of ``task``, with the wrong bits in the title."""
    device = next(model.parameters()).device
    paths = []
    for name, batch in examples.items():
        with torch.no_grad(), record_maps(model) as looked:  # the weightings, as a user asks for them
            out = model(batch.inputs.to(device), record=True)  # and the memory after every step
        wrong = wrong_bits(out.logits, batch.targets.to(device)).item()
        title = f"{task}: {name}, T = {batch.inputs.shape[1]}, {wrong:.0f} wrong bits"
        paths.append(
            plot_ntm(
                batch.inputs[0],
                torch.sigmoid(out.logits[0]).cpu(),
                batch.targets[0],
                looked["write_weights"][0].sum(1).cpu(),
                looked["read_weights"][0].sum(1).cpu(),
                out.memory[0, -1].cpu(),
                figures_dir / f"ntm-{name}.png",
                title,
            )
        )
    return paths
