"""Structural passes, run in this order before the rule pass. Each is ``run(module, ctx) -> module``
and must keep the line structure of the code it rewrites (findings are located on its input)."""
from __future__ import annotations

from fwport.passes import decorators, model_api, sequential, subclass

PASSES = [
    model_api.run,  # model.fit/compile/predict/save_weights... on translated models: errors saying what to write
    sequential.run,  # keras.Sequential([...]) / Sequential() + .add → nn.Sequential, shapes propagated
    subclass.run,  # keras.Model / keras.layers.Layer subclasses → nn.Module
    decorators.run,  # @tf.function removed (or torch.compile)
]
