"""Model statistics without Keras: what the parent knows of a workload before it runs.

The ``ModelStats`` record a run reports, and the analytic training FLOPs and parameter
counts of the built-in families from their parameters, counted the way
``workloads.flops.model_stats`` counts a built model (FLOPS_METHOD): the parent prices
a sweep from them before anything ran. Importing this never imports Keras.
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
    # What the run fed the model and how it scored it (the record of
    # bench.child.backends.tf.task): for a user's model all of it is read from the model.
    inputs: list[str] | None = None
    labels: str | None = None
    loss: str | None = None
    optimizer: str | None = None
    data: str | None = None



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
