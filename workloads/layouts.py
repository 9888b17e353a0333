"""Model-parallel layouts of the built-in workloads (strategy model_parallel, JAX lane).

A layout is plain data: ``{variable path regex: one mesh axis name or None per
dimension}``, the form of Keras 3's ``keras.distribution.LayoutMap`` keys and
``TensorLayout`` axes, which the child builds from it. Kept free of Keras so that the
parent can tell which workloads have one (``Workload.layout``).

The split is Megatron's for a stack of Dense layers: a layer whose kernel is split by
columns (its outputs along ``model``) feeds one split by rows, so each pair needs one
all-reduce of its output instead of gathering every activation.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

Layout = dict[str, tuple[str | None, ...]]
MODEL = "model"


def _column(name: str) -> Layout:
    return {f"{name}/kernel$": (None, MODEL), f"{name}/bias$": (MODEL,)}


def _row(name: str) -> Layout:
    return {f"{name}/kernel$": (MODEL, None), f"{name}/bias$": (None,)}


def mlp_layout(p: Mapping[str, Any]) -> Layout:
    """Hidden layers alternate column and row splits; the logits layer continues the
    alternation (rows after a column-split layer, replicated otherwise)."""
    out: Layout = {}
    hidden = len(p["widths"])
    for i in range(hidden):
        out.update(_column(f"dense_{i}") if i % 2 == 0 else _row(f"dense_{i}"))
    if hidden % 2:
        out.update(_row("logits"))
    return out


def transformer_layout(p: Mapping[str, Any]) -> Layout:
    """Attention split by heads (query, key and value kernels ``width x heads x
    head_dim`` along the heads; the output projection ``heads x head_dim x width`` by
    rows), the feed-forward pair column then row; embeddings, norms and logits
    replicated."""
    out: Layout = {}
    for i in range(p["layers"]):
        for proj in ("query", "key", "value"):
            out[f"attention_{i}/{proj}/kernel$"] = (None, MODEL, None)
            out[f"attention_{i}/{proj}/bias$"] = (MODEL, None)
        out[f"attention_{i}/attention_output/kernel$"] = (MODEL, None, None)
        out.update(_column(f"ffn_in_{i}"))
        out.update(_row(f"ffn_out_{i}"))
    return out
