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


def build_transformer(p: Mapping[str, Any]) -> Any:
    """A BERT-style encoder for sequence classification: token and position embeddings
    (both looked up, so their gradients are IndexedSlices), ``layers`` post-norm blocks
    of multi-head self-attention and a GELU feed-forward, mean-pooled, float32 logits.

    Built from Keras layers. keras-hub's TransformerEncoder and
    TokenAndPositionEmbedding would do the same, but keras-hub 0.32 requires
    tensorflow-text, which requires the full ``tensorflow`` distribution: pip would
    install it beside tensorflow-cpu and overwrite the installed build (the trap
    tf-keras sets, see pyproject.toml). No dropout: runs of different strategies must
    train identically (loss parity).
    """
    import keras

    class TokenAndPositionEmbedding(keras.layers.Layer):
        """Token embedding plus a learned position embedding, both by lookup."""

        def __init__(self, vocab: int, length: int, width: int, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self.length = length
            self.token = keras.layers.Embedding(vocab, width, name="token_embedding")
            self.position = keras.layers.Embedding(length, width, name="position_embedding")

        def build(self, input_shape: Any) -> None:
            self.token.build(input_shape)
            self.position.build((self.length,))

        def call(self, tokens: Any) -> Any:
            return self.token(tokens) + self.position(keras.ops.arange(self.length))

        def compute_output_shape(self, input_shape: Any) -> Any:
            return self.token.compute_output_shape(input_shape)

    tokens = keras.Input((p["seq_len"],), dtype="int32", name="tokens")
    x = TokenAndPositionEmbedding(p["vocab"], p["seq_len"], p["width"],
                                  name="embeddings")(tokens)
    for i in range(p["layers"]):
        attention = keras.layers.MultiHeadAttention(
            p["heads"], p["width"] // p["heads"], name=f"attention_{i}")(x, x)
        x = keras.layers.LayerNormalization(epsilon=1e-6, name=f"norm_a{i}")(x + attention)
        h = keras.layers.Dense(p["ffn"], activation="gelu", name=f"ffn_in_{i}")(x)
        h = keras.layers.Dense(p["width"], name=f"ffn_out_{i}")(h)
        x = keras.layers.LayerNormalization(epsilon=1e-6, name=f"norm_f{i}")(x + h)
    x = keras.layers.GlobalAveragePooling1D(name="pool")(x)
    return keras.Model(tokens, _logits(keras, x, p["classes"]), name="transformer")
