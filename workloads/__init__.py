"""Workload registry: MLP, CNN, ResNet50 and a Transformer encoder, each with a default
and a tiny variant; and ``find_workload``, which also reads a model of the user's own
(``module:function``, ``file.py:function``, ``model.keras``: workloads.user)."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

from bench.errors import UnknownNameError
from bench.registry import Registry
from workloads.base import Workload
from workloads.formulas import (
    cnn_params,
    cnn_train_flops,
    mlp_params,
    mlp_train_flops,
    resnet50_params,
    resnet50_train_flops,
    transformer_params,
)
from workloads.layouts import mlp_layout, transformer_layout
from workloads.user import SPELLINGS, UserWorkload, looks_like_user_model, parse_ref


def _builder(name: str) -> Callable[[Mapping[str, Any]], Any]:
    """``workloads.models.<name>``, imported when a model is built.

    The parent side reads the registry (parameters, prices, checks) but never imports
    Keras: the builders' module is imported by the process that builds, the child.
    """
    def build(p: Mapping[str, Any]) -> Any:
        return getattr(importlib.import_module("workloads.models"), name)(p)

    build.__name__ = build.__qualname__ = name
    return build


WORKLOADS: Registry[Workload] = Registry("workload")

WORKLOADS.register("mlp", Workload(
    name="mlp",
    description="fully connected ReLU network (default 784-512-512-10, MNIST-shaped)",
    defaults={"input_dim": 784, "widths": (512, 512), "classes": 10},
    tiny={"input_dim": 32, "widths": (32,), "classes": 4},
    build=_builder("build_mlp"),
    input_shape=lambda p: (p["input_dim"],),
    train_flops=mlp_train_flops,
    params=mlp_params,
    layout=mlp_layout,
))
WORKLOADS.register("cnn", Workload(
    name="cnn",
    description="VGG-style CNN, 3 blocks of 2 convolutions (default 32x32x3, CIFAR-shaped)",
    defaults={"image_size": 32, "channels": 3, "filters": (32, 64, 128), "dense": 256,
              "classes": 10},
    tiny={"image_size": 8, "channels": 3, "filters": (8,), "dense": 16, "classes": 4},
    build=_builder("build_cnn"),
    input_shape=lambda p: (p["image_size"], p["image_size"], p["channels"]),
    teacher_pool=4,
    cost_hint=1.2,
    convolutional=True,
    train_flops=cnn_train_flops,
    params=cnn_params,
))
WORKLOADS.register("resnet50", Workload(
    name="resnet50",
    description=("keras.applications.ResNet50, weights=None (default 224x224, 1000 classes; "
                 "image_size is a parameter, >= 32)"),
    defaults={"image_size": 224, "classes": 1000},
    # ResNet50 has no smaller sibling in keras.applications: the tiny variant keeps the
    # architecture and shrinks the input to the minimum Keras accepts.
    tiny={"image_size": 32, "classes": 4},
    build=_builder("build_resnet50"),
    input_shape=lambda p: (p["image_size"], p["image_size"], 3),
    teacher_pool=4,
    check=lambda p: None if p["image_size"] >= 32 else "image_size must be >= 32 for ResNet50",
    cost_hint=4.0,
    train_flops=resnet50_train_flops,
    params=resnet50_params,
    batch_norm=True,
    convolutional=True,
))
WORKLOADS.register("transformer", Workload(
    name="transformer",
    description=("Transformer encoder, token and position embeddings, sequence "
                 "classification (default: BERT-mini's 4 layers of width 256, 4 heads, "
                 "feed-forward 1024, vocabulary 30522, 128 tokens)"),
    defaults={"vocab": 30522, "seq_len": 128, "width": 256, "heads": 4, "layers": 4,
              "ffn": 1024, "classes": 2},
    tiny={"vocab": 64, "seq_len": 8, "width": 16, "heads": 2, "layers": 1, "ffn": 32,
          "classes": 4},
    build=_builder("build_transformer"),
    input_shape=lambda p: (p["seq_len"],),
    vocab=lambda p: p["vocab"],
    check=lambda p: None if p["width"] % p["heads"] == 0 else "width must be a multiple of heads",
    flops="graph",
    cost_hint=3.0,
    params=transformer_params,
    layout=transformer_layout,
))


def find_workload(text: str) -> Workload | UserWorkload:
    """The workload ``text`` names: a built-in name, or a model of the user's own by its
    spelling (checked for form only: nothing is read). UnknownNameError lists both."""
    if text in WORKLOADS:
        return WORKLOADS.get(text)
    if looks_like_user_model(text):
        return UserWorkload(parse_ref(text))
    raise UnknownNameError(f"unknown workload {text!r}; valid: {', '.join(WORKLOADS.names())}, "
                           f"or a model of your own: {SPELLINGS}. Received: {text!r}")


__all__ = ["WORKLOADS", "UserWorkload", "Workload", "find_workload"]
