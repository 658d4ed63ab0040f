"""foveal.viz"""

from foveal.viz import glimpses  # noqa: F401  (registers FIGURES["glimpses"]; matplotlib is imported lazily)
