"""foveal.models"""

from foveal.models.draw import DRAW as DRAW
from foveal.models.draw import DRAWOutput as DRAWOutput
from foveal.models.draw import Generation as Generation
