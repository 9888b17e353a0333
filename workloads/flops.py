"""Model statistics: parameter count, gradient bytes per step, FLOPs per example.

FLOPs are analytic and count what a training step executes in the layers that
dominate (Dense and convolutions; normalisation, activations and pooling are left
out): 2 x multiply-accumulates per layer for the forward pass, as many again for
the gradient of its weights, and as many again for the gradient of its input, but
only where that gradient is needed: a layer that only data flows into (the first
layer) has no input gradient, since nothing upstream of it trains. (A flat "3 x
forward" counts it anyway: 25% too much for the MLP.)
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

FLOPS_METHOD = ("analytic, as executed: per Dense/Conv layer 2 x MACs forward, 2 x MACs "
                "for its weight gradient, 2 x MACs for its input gradient unless only data "
                "flows into it (no trainable layer upstream); other layers not counted")


@dataclass(frozen=True)
class ModelStats:
    params: int
    trainable_params: int
    grad_bytes_per_step: int
    forward_flops_per_example: float
    train_flops_per_example: float
    flops_method: str = FLOPS_METHOD
    # What the run fed the model and how it scored it (bench.child.backends.tf.task's record): for
    # a user's model all of it is read from the model.
    inputs: list[str] | None = None
    labels: str | None = None
    loss: str | None = None
    optimizer: str | None = None
    data: str | None = None


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


# -- analytic estimates without Keras (the parent prices a sweep before any run) --------
def _train_from_layers(layers: list[tuple[float, bool]]) -> float:
    """Training-step FLOPs per example of ``(forward MACs, only data flows in)`` layers,
    counted as ``model_stats`` counts a built model (FLOPS_METHOD)."""
    return sum(2.0 * macs * (2 if first else 3) for macs, first in layers)


def mlp_train_flops(p: Any) -> float:
    """``workloads.models.build_mlp``'s training FLOPs per example, from its parameters."""
    widths = [int(p["input_dim"]), *map(int, p["widths"]), int(p["classes"])]
    return _train_from_layers([(float(a * b), i == 0)
                               for i, (a, b) in enumerate(itertools.pairwise(widths))])


def cnn_train_flops(p: Any) -> float:
    """``build_cnn``'s: two 3x3 'same' convolutions a block, 2x2 pooling, two Dense."""
    size, channels = int(p["image_size"]), int(p["channels"])
    layers: list[tuple[float, bool]] = []
    for filters in map(int, p["filters"]):
        for _ in range(2):
            layers.append((9.0 * channels * filters * size * size, not layers))
            channels = filters
        size //= 2
    layers += [(float(size * size * channels * int(p["dense"])), False),
               (float(int(p["dense"]) * int(p["classes"])), False)]
    return _train_from_layers(layers)


def resnet50_train_flops(p: Any) -> float:
    """``keras.applications.ResNet50``'s (v1: the stride on each stage's first 1x1
    convolution), at ``image_size``, with the Dense logits on top: 22.9 GFLOP per
    example at 224x224 (7.7 forward: 3.9 GMACs)."""
    size = (int(p["image_size"]) + 6 - 7) // 2 + 1  # 7x7/2 after 3 pixels of padding
    layers = [(49.0 * 3 * 64 * size * size, True)]
    size = (size + 2 - 3) // 2 + 1  # 3x3/2 max-pooling after 1 pixel of padding
    channels = 64
    for filters, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
        for block in range(blocks):
            s = stride if block == 0 else 1
            out = (size - 1) // s + 1
            layers.append((float(channels * filters * out * out), False))
            layers.append((9.0 * filters * filters * out * out, False))
            layers.append((float(filters * 4 * filters * out * out), False))
            if block == 0:  # the projection shortcut
                layers.append((float(channels * 4 * filters * out * out), False))
            size, channels = out, 4 * filters
    layers.append((float(channels * int(p["classes"])), False))
    return _train_from_layers(layers)


# -- parameters, from the same arguments (memory and gradient bytes before a build) -----
def mlp_params(p: Any) -> int:
    """``build_mlp``'s weights and biases."""
    widths = [int(p["input_dim"]), *map(int, p["widths"]), int(p["classes"])]
    return sum(a * b + b for a, b in itertools.pairwise(widths))


def cnn_params(p: Any) -> int:
    """``build_cnn``'s: two 3x3 convolutions a block, then two Dense layers."""
    size, channels, total = int(p["image_size"]), int(p["channels"]), 0
    for filters in map(int, p["filters"]):
        for _ in range(2):
            total += 9 * channels * filters + filters
            channels = filters
        size //= 2
    dense = int(p["dense"])
    return total + size * size * channels * dense + dense + dense * int(p["classes"]) + \
        int(p["classes"])


def resnet50_params(p: Any) -> int:
    """``keras.applications.ResNet50``'s (25,636,712 with 1000 classes, of which 53,120
    are BatchNormalization's moving statistics): its body and a Dense head."""
    return 23_587_712 + 2049 * int(p["classes"])


def transformer_params(p: Any) -> int:
    """``build_transformer``'s: token and position embeddings, each layer's attention
    (four projections), feed-forward and two LayerNorms, the classifier."""
    w, ffn = int(p["width"]), int(p["ffn"])
    layer = 4 * (w * w + w) + (w * ffn + ffn) + (ffn * w + w) + 4 * w
    return (int(p["vocab"]) + int(p["seq_len"])) * w + int(p["layers"]) * layer + \
        w * int(p["classes"]) + int(p["classes"])
