"""Model statistics: parameter count, gradient bytes per step, FLOPs per example.

FLOPs are analytic and count what a training step executes in the layers that
dominate (Dense and convolutions; normalisation, activations and pooling are left
out): 2 x multiply-accumulates per layer for the forward pass, as many again for
the gradient of its weights, and as many again for the gradient of its input, but
only where that gradient is needed: a layer that only data flows into (the first
layer) has no input gradient, since nothing upstream of it trains. (A flat "3 x
forward" counts it anyway: 25% too much for the MLP.)

The child side counts here (Keras is imported inside the functions, and only the
child imports this module); the same counts from parameters alone, for the parent
before a run, are workloads.formulas.
"""

from __future__ import annotations

from typing import Any

from workloads.formulas import FLOPS_METHOD, ModelStats

__all__ = ["FLOPS_METHOD", "ModelStats", "model_stats"]


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


def _trainable_upstream(layer: Any, memo: dict[int, bool]) -> bool:
    """Whether a layer with trainable weights feeds ``layer`` (directly or not): only
    then does the backward pass compute the gradient with respect to its input."""
    key = id(layer)
    if key in memo:
        return memo[key]
    memo[key] = False  # guards against cycles while this layer is being resolved
    found = False
    for node in getattr(layer, "_inbound_nodes", None) or []:
        for parent in node.parent_nodes:
            op = getattr(parent, "operation", None) or parent.layer  # tf_keras: .layer
            if getattr(op, "trainable_weights", None) or _trainable_upstream(op, memo):
                found = True
                break
        if found:
            break
    memo[key] = found
    return found


def _train_flops(model: Any, upstream_outside: bool) -> tuple[float, float]:
    """(forward, training step) FLOPs per example of ``model``'s Dense/Conv layers.

    ``upstream_outside``: a trainable layer feeds this (nested) model from outside.
    Layers are read from the model's graph (Keras records which layer feeds which);
    a model without that record counts every weighted layer but the first as needing
    its input gradient.
    """
    import keras

    fwd = train = 0.0
    memo: dict[int, bool] = {}
    graph_known = any(getattr(layer, "_inbound_nodes", None) for layer in model.layers)
    seen_weights = False
    for layer in model.layers:
        if graph_known:
            upstream = upstream_outside or _trainable_upstream(layer, memo)
        else:
            upstream = upstream_outside or seen_weights
        seen_weights = seen_weights or bool(layer.trainable_weights)
        if isinstance(layer, keras.Model):  # nested model: its own layers, same rule
            f, t = _train_flops(layer, upstream)
            fwd, train = fwd + f, train + t
            continue
        f = _layer_forward_flops(layer)
        weight_grad = f if layer.trainable_weights else 0.0
        input_grad = f if upstream else 0.0
        fwd += f
        train += f + weight_grad + input_grad
    return fwd, train


def model_stats(model: Any) -> ModelStats:
    """Statistics of a built Keras functional/sequential model."""
    trainable = sum(_prod(v.shape) for v in model.trainable_variables)
    total = sum(_prod(v.shape) for v in model.variables)
    grad_bytes = sum(_prod(v.shape) * _dtype_bytes(v.dtype) for v in model.trainable_variables)
    fwd, train = _train_flops(model, upstream_outside=False)
    return ModelStats(total, trainable, grad_bytes, fwd, train)


def _dtype_bytes(dtype: Any) -> int:
    name = str(getattr(dtype, "name", dtype))
    for key, size in (("64", 8), ("32", 4), ("16", 2), ("8", 1)):
        if key in name:
            return size
    return 4
