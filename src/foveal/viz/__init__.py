"""foveal.viz"""

from foveal.viz import glimpses  # noqa: F401  (registers FIGURES["glimpses"]; matplotlib is imported lazily)
from foveal.viz._mpl import pyplot

__all__ = ["pyplot"]
