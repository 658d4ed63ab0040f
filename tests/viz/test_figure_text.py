"""Figures the pages show are readable there: no text under 10 pixels high at the size the page shows it."""

from __future__ import annotations

import pytest
import torch

from foveal.viz._mpl import MIN_TEXT_PX, PAGE_WIDTH_PX


@pytest.fixture
def smallest_text(monkeypatch) -> list[float]:
    """For each figure saved while the test runs, the height in pixels of its smallest drawn text where a
    page shows it (a PNG wider than the page is scaled down to :data:`PAGE_WIDTH_PX`)."""
    from matplotlib.figure import Figure
    from matplotlib.text import Text
    from PIL import Image

    heights: list[float] = []
    drawn: list[float] = []
    save, draw = Figure.savefig, Text.draw

    def draw_text(self, renderer):
        if self.get_visible() and self.get_text().strip():
            drawn.append(self.get_fontsize())
        return draw(self, renderer)

    def measured(self, fname, *args, **kwargs):
        drawn.clear()
        save(self, fname, *args, **kwargs)
        dpi = kwargs.get("dpi") or self.dpi
        scale = min(1.0, PAGE_WIDTH_PX / Image.open(fname).size[0])
        heights.append(min(drawn) * dpi / 72 * scale)

    monkeypatch.setattr(Figure, "savefig", measured)
    monkeypatch.setattr(Text, "draw", draw_text)
    return heights


def test_the_measure_can_fail(smallest_text, tmp_path) -> None:
    from foveal.viz import pyplot

    fig, ax = pyplot().subplots(figsize=(20, 2))
    ax.set_title("small", fontsize=8)
    fig.savefig(tmp_path / "wide.png", dpi=100)  # 2,000 pixels wide: the page halves it
    pyplot().close(fig)
    assert smallest_text == [pytest.approx(8 * 100 / 72 * PAGE_WIDTH_PX / 2000, rel=0.02)]


def test_attention_figure_text_is_readable(smallest_text, tmp_path) -> None:
    from foveal.viz.heatmap import attention_figure

    g = torch.Generator().manual_seed(0)
    images = [torch.rand(3, 64, 64, generator=g) for _ in range(8)]
    maps = [torch.rand(1, 64, generator=g).softmax(-1) for _ in range(8)]
    masks = [torch.rand(64, 64, generator=g) > 0.5 for _ in range(8)]
    titles = ["is there not a brown shape in the image\npred: yes | truth: yes (ok)"] * 8
    attention_figure(images, maps, titles, tmp_path / "a.png", grid=(8, 8), masks=masks)
    assert smallest_text[0] >= MIN_TEXT_PX


@pytest.mark.parametrize("hops", [1, 2])
def test_vqa_family_figure_text_is_readable(smallest_text, tmp_path, hops: int) -> None:
    from foveal.viz.vqa_family import QuestionPanel, vqa_family_figure

    g = torch.Generator().manual_seed(0)
    words = ["which", "object", "is", "furthest", "from", "the", "orange", "object"]
    panels = [
        QuestionPanel(
            image=torch.rand(3, 75, 75, generator=g),
            title="which object is furthest from the orange object?\npred: box 0 | truth: box 3 (the blue object)",
            maps=torch.rand(hops, 49, generator=g).softmax(-1),
            words=words,
            word_weights=torch.rand(hops, len(words), generator=g).softmax(-1),
            channel_weights=torch.rand(24, generator=g).softmax(-1),
            boxes=torch.tensor([[2, 2, 12, 12], [20, 20, 30, 30], [40, 5, 50, 15], [5, 50, 15, 60]]),
            chosen=0,
            correct=3,
            objects=torch.tensor([[2, 2, 12, 12], [5, 50, 15, 60]]),
            object_names=["orange (named)", "blue (answer's)"],
        )
        for _ in range(9)
    ]
    vqa_family_figure(panels, tmp_path / "f.png", grid=(7, 7), extent=70, head="stacked")
    assert smallest_text[0] >= MIN_TEXT_PX


@pytest.fixture
def smallest_pil_text(monkeypatch) -> list[float]:
    """For each PNG PIL saves while the test runs, the height in pixels of its smallest drawn font where a
    page shows it: the font's size (its em, in pixels, as matplotlib's is) times the page's scale."""
    from PIL import Image, ImageDraw

    heights: list[float] = []
    drawn: list[float] = []
    save, text = Image.Image.save, ImageDraw.ImageDraw.text

    def draw_text(self, xy, words, *args, **kwargs):
        if str(words).strip():
            font = kwargs.get("font") or self.getfont()
            drawn.append(font.size)
        return text(self, xy, words, *args, **kwargs)

    def measured(self, fp, *args, **kwargs):
        save(self, fp, *args, **kwargs)
        if str(fp).endswith(".png"):
            heights.append(min(drawn) * min(1.0, PAGE_WIDTH_PX / self.width))
        drawn.clear()

    monkeypatch.setattr(Image.Image, "save", measured)
    monkeypatch.setattr(ImageDraw.ImageDraw, "text", draw_text)
    return heights


def test_the_pil_measure_can_fail(smallest_pil_text, tmp_path) -> None:
    from PIL import Image, ImageDraw, ImageFont

    picture = Image.new("RGB", (2 * PAGE_WIDTH_PX, 40))
    ImageDraw.Draw(picture).text((4, 4), "small", font=ImageFont.load_default(size=10))
    picture.save(tmp_path / "wide.png")  # the page halves it
    assert smallest_pil_text == [pytest.approx(5.0)]


def test_draw_legend_under_a_sheet_wider_than_the_page_is_readable(smallest_pil_text, tmp_path) -> None:
    from PIL import Image

    from foveal.viz.draw import READ_COLOUR, WRITE_COLOUR, with_legend

    sheet = Image.new("RGB", (3 * PAGE_WIDTH_PX, 100))
    with_legend(sheet, [("read window", READ_COLOUR), ("write window", WRITE_COLOUR)], "rows: test images").save(
        tmp_path / "wide.png"
    )
    assert smallest_pil_text[0] >= MIN_TEXT_PX


@pytest.mark.parametrize("name", ["stn", "ram", "ntm-copy"])
def test_shipped_model_figure_text_is_readable(smallest_text, tmp_path, name: str) -> None:
    from foveal.demo import draw_model

    paths = draw_model(name, tmp_path)
    assert len(smallest_text) == len(paths)
    assert min(smallest_text) >= MIN_TEXT_PX, smallest_text


def test_draw_figure_legend_is_readable(smallest_pil_text, tmp_path) -> None:
    from foveal.demo import draw_model

    paths = draw_model("draw", tmp_path)
    assert len(smallest_pil_text) == sum(p.suffix == ".png" for p in paths) == 2
    assert min(smallest_pil_text) >= MIN_TEXT_PX, smallest_pil_text
