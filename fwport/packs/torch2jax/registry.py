"""The torch2jax pack's named transforms (see fwport/core/transform.py): ``ops.py`` registers
the call transforms its rules name."""
from fwport.core.transform import Transforms

TRANSFORMS = Transforms("torch2jax")
value_transform = TRANSFORMS.value
call_transform = TRANSFORMS.call
