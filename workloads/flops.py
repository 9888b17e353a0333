"""Model statistics: parameter count, gradient bytes per step, FLOPs per example.

FLOPs are analytic: 2 x multiply-accumulates of every Dense and convolution layer
in the forward pass (the layers that dominate; normalisation, activations and
pooling are left out), times 3 for a training step (backward ~ 2 x forward).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

FLOPS_METHOD = ("analytic: 2 x MACs of Dense/Conv layers in the forward pass, "
                "x3 for forward + backward; other layers not counted")


@dataclass(frozen=True)
class ModelStats:
    params: int
    trainable_params: int
    grad_bytes_per_step: int
    forward_flops_per_example: float
    train_flops_per_example: float
    flops_method: str = FLOPS_METHOD


def _prod(shape: Any) -> int:
    n = 1
    for d in shape:
        n *= int(d)
    return n


def _layer_forward_flops(layer: Any) -> float:
    import keras

    if isinstance(layer, keras.Model):  # nested model: recurse
        return sum(_layer_forward_flops(sub) for sub in layer.layers)
    if isinstance(layer, keras.layers.Dense):
        return 2.0 * _prod(layer.kernel.shape)
    if isinstance(layer, keras.layers.DepthwiseConv2D):
        out = layer.output.shape[1:-1]
        return 2.0 * _prod(layer.kernel.shape) * _prod(out)
    if isinstance(layer, (keras.layers.Conv1D, keras.layers.Conv2D, keras.layers.Conv3D)):
        out = layer.output.shape[1:-1]  # spatial dims of the output
        return 2.0 * _prod(layer.kernel.shape) * _prod(out)
    return 0.0


def model_stats(model: Any) -> ModelStats:
    """Statistics of a built Keras functional/sequential model."""
    trainable = sum(_prod(v.shape) for v in model.trainable_variables)
    total = sum(_prod(v.shape) for v in model.variables)
    grad_bytes = sum(_prod(v.shape) * _dtype_bytes(v.dtype) for v in model.trainable_variables)
    fwd = sum(_layer_forward_flops(layer) for layer in model.layers)
    return ModelStats(total, trainable, grad_bytes, fwd, 3.0 * fwd)


def _dtype_bytes(dtype: Any) -> int:
    name = str(getattr(dtype, "name", dtype))
    for key, size in (("64", 8), ("32", 4), ("16", 2), ("8", 1)):
        if key in name:
            return size
    return 4
