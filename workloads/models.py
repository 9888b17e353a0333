"""The model builders: MLP, CNN and ResNet50. Keras is imported lazily."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def _logits(keras: Any, x: Any, classes: int) -> Any:
    # Logits in float32 even under a mixed policy, so the loss is computed stably.
    return keras.layers.Dense(classes, dtype="float32", name="logits")(x)


def build_mlp(p: Mapping[str, Any]) -> Any:
    import keras

    inputs = keras.Input((p["input_dim"],), name="features")
    x = inputs
    for i, width in enumerate(p["widths"]):
        x = keras.layers.Dense(width, activation="relu", name=f"dense_{i}")(x)
    return keras.Model(inputs, _logits(keras, x, p["classes"]), name="mlp")


def build_cnn(p: Mapping[str, Any]) -> Any:
    """VGG-style blocks: two 3x3 convolutions then 2x2 max-pooling per block."""
    import keras

    s = p["image_size"]
    inputs = keras.Input((s, s, p["channels"]), name="images")
    x = inputs
    for i, filters in enumerate(p["filters"]):
        for j in range(2):
            x = keras.layers.Conv2D(filters, 3, padding="same", activation="relu",
                                    name=f"conv{i}_{j}")(x)
        x = keras.layers.MaxPooling2D(2, name=f"pool{i}")(x)
    x = keras.layers.Flatten()(x)
    x = keras.layers.Dense(p["dense"], activation="relu", name="fc")(x)
    return keras.Model(inputs, _logits(keras, x, p["classes"]), name="cnn")


def build_resnet50(p: Mapping[str, Any]) -> Any:
    """keras.applications.ResNet50 (weights=None) with float32 logits on top."""
    import keras

    s = p["image_size"]
    backbone = keras.applications.ResNet50(
        weights=None, include_top=False, input_shape=(s, s, 3), pooling="avg")
    return keras.Model(backbone.input, _logits(keras, backbone.output, p["classes"]),
                       name="resnet50")
