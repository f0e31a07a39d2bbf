"""The tf2torch pack's named transforms (see fwport/core/transform.py): ``values.py`` registers
value transforms, ``ops.py`` call transforms, ``layer.py`` layer shape functions."""
from fwport.core.transform import Transforms

TRANSFORMS = Transforms("tf2torch")
value_transform = TRANSFORMS.value
call_transform = TRANSFORMS.call
shape = TRANSFORMS.shape
