"""DRAW's attentive read and write as modules: a linear layer turns a state into the window (seed 004).

The functions underneath, :func:`~foveal.glimpse.gaussian.gaussian_read` and
:func:`~foveal.glimpse.gaussian.gaussian_write`, take the five window parameters directly.
"""

from __future__ import annotations

from torch import Tensor, nn

from foveal._checks import check_choice, check_hw, check_int, check_module_dtype, check_shape, check_tensor
from foveal.attention.maps import register_map_module
from foveal.glimpse._images import check_image
from foveal.glimpse.gaussian import ReadOutput, WriteOutput, gaussian_read, gaussian_write
from foveal.glimpse.separable import Truncate


@register_map_module
class GaussianRead(nn.Module):
    """DRAW's attentive read: a linear layer turns a state into the five parameters, then :func:`gaussian_read`.

    The layer is the seed's ``[g~_X, g~_Y, log sigma^2, log delta~, log gamma] = W(h^dec)``.

    Args:
        in_features: size of the state ``h`` (DRAW: the decoder's previous hidden state).
        N: the glimpse is ``N x N``.
        truncate: as in :func:`gaussian_glimpse`: ``"auto"`` compiles and exports (the dense product
            while traced), ``True`` does not.

    Raises:
        ValueError (:class:`~foveal.errors.FovealError`): ``in_features`` or ``N`` below 1, an unknown
            ``truncate``; in ``forward``, as :func:`gaussian_read`, and an ``h`` that is not
            ``(B, in_features)`` of the layer's dtype.

    Shape:
        - images, error_images: ``(B, C, H, W)``; h: ``(B, in_features)``
        - output: ``(B, C or 2C, N, N)``

    Example:
        >>> import torch
        >>> read = GaussianRead(16, N=5)
        >>> out, window = read(torch.rand(3, 1, 28, 28), torch.zeros(3, 16))
        >>> out.shape
        torch.Size([3, 1, 5, 5])
    """

    def __init__(self, in_features: int, N: int, *, truncate: Truncate = "auto") -> None:
        super().__init__()
        in_features = check_int("in_features", in_features)
        self.N = check_int("N", N)
        check_choice("truncate", truncate, (True, False, "auto"))
        self.truncate = truncate
        self.params = nn.Linear(in_features, 5)

    def forward(self, images: Tensor, h: Tensor, error_images: Tensor | None = None) -> ReadOutput:
        sizes = check_image("images", images)
        check_shape("h", check_tensor("h", h), ("B", self.params.in_features), sizes)
        check_module_dtype(self, h=h)
        return gaussian_read(images, self.params(h), self.N, error_images, truncate=self.truncate)


@register_map_module
class GaussianWrite(nn.Module):
    """DRAW's attentive write: ``w_t = W(h)`` and the five parameters from ``h``, then :func:`gaussian_write`.

    Args:
        in_features: size of the state ``h`` (DRAW: the decoder's hidden state).
        N: the writing patch is ``N x N``.
        channels: channels of the canvas.

    Raises:
        ValueError (:class:`~foveal.errors.FovealError`): a size below 1; in ``forward``, an ``h`` that
            is not ``(B, in_features)`` of the layers' dtype, or an ``image_size`` below 1.

    Shape:
        - h: ``(B, in_features)``
        - output: ``(B, channels, H, W)``

    Example:
        >>> import torch
        >>> write = GaussianWrite(16, N=5, channels=1)
        >>> out, window = write(torch.zeros(3, 16), (28, 28))
        >>> out.shape
        torch.Size([3, 1, 28, 28])
    """

    def __init__(self, in_features: int, N: int, channels: int = 1) -> None:
        super().__init__()
        in_features = check_int("in_features", in_features)
        self.N = check_int("N", N)
        self.channels = check_int("channels", channels)
        self.params = nn.Linear(in_features, 5)
        self.patch = nn.Linear(in_features, channels * N * N)

    def forward(self, h: Tensor, image_size: tuple[int, int]) -> WriteOutput:
        check_shape("h", check_tensor("h", h), (None, self.params.in_features))
        check_module_dtype(self, h=h)
        check_hw("image_size", image_size)
        patch = self.patch(h).view(-1, self.channels, self.N, self.N)
        return gaussian_write(patch, self.params(h), image_size)


__all__ = ["GaussianRead", "GaussianWrite"]
