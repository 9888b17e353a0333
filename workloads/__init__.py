"""Workload registry: MLP, CNN and ResNet50, each with a default and a tiny variant."""

from __future__ import annotations

from bench.registry import Registry
from workloads.base import Workload
from workloads.models import build_cnn, build_mlp, build_resnet50

WORKLOADS: Registry[Workload] = Registry("workload")

WORKLOADS.register("mlp", Workload(
    name="mlp",
    description="fully connected ReLU network (default 784-512-512-10, MNIST-shaped)",
    defaults={"input_dim": 784, "widths": (512, 512), "classes": 10},
    tiny={"input_dim": 32, "widths": (32,), "classes": 4},
    build=build_mlp,
    input_shape=lambda p: (p["input_dim"],),
))
WORKLOADS.register("cnn", Workload(
    name="cnn",
    description="VGG-style CNN, 3 blocks of 2 convolutions (default 32x32x3, CIFAR-shaped)",
    defaults={"image_size": 32, "channels": 3, "filters": (32, 64, 128), "dense": 256,
              "classes": 10},
    tiny={"image_size": 8, "channels": 3, "filters": (8,), "dense": 16, "classes": 4},
    build=build_cnn,
    input_shape=lambda p: (p["image_size"], p["image_size"], p["channels"]),
    teacher_pool=4,
    cost_hint=1.2,
))
WORKLOADS.register("resnet50", Workload(
    name="resnet50",
    description=("keras.applications.ResNet50, weights=None (default 224x224, 1000 classes; "
                 "image_size is a parameter, >= 32)"),
    defaults={"image_size": 224, "classes": 1000},
    # ResNet50 has no smaller sibling in keras.applications: the tiny variant keeps the
    # architecture and shrinks the input to the minimum Keras accepts.
    tiny={"image_size": 32, "classes": 4},
    build=build_resnet50,
    input_shape=lambda p: (p["image_size"], p["image_size"], 3),
    teacher_pool=4,
    check=lambda p: None if p["image_size"] >= 32 else "image_size must be >= 32 for ResNet50",
    cost_hint=4.0,
))

__all__ = ["WORKLOADS", "Workload"]
