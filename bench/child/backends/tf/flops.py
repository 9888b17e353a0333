"""FLOPs of any Keras model from its traced training step (child side).

The analytic count (workloads.flops) knows Dense and convolution layers; a model of
the user's own, or the Transformer (its attention projections are EinsumDense layers
and its attention two einsums), holds other ops. Here the step is traced as TensorFlow
builds it (the forward pass, then the tape's gradients with respect to the trainable
variables) at the run's per-replica batch, and every op of the graph is costed by
TensorFlow's own op statistics (``ops.get_stats_for_node_def(graph, node, "flops")``,
the ``RegisterStatistics`` table behind ``tf.compat.v1.profiler``'s
``float_operation``), from the op's shapes. TensorFlow registers no statistic for
``Einsum``; one is registered here by the same rule its ``BatchMatMul`` follows (2 x
the product of every index's size when an index is summed over).

What is counted as the model's FLOPs: the matrix-multiply and convolution families
(MATRIX_OPS), the work a FLOP/s peak measures, as the analytic count does; the
elementwise ops TensorFlow also costs (adds, multiplies, softmax...) are reported
apart by ``graph_flops``. Ops inside nested functions of the graph are not counted.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
from collections.abc import Callable
from typing import Any

from bench.spec import RunSpec
from workloads.flops import ModelStats, model_stats

MATRIX_OPS = ("MatMul", "BatchMatMul", "BatchMatMulV2", "BatchMatMulV3", "Einsum", "Conv2D",
              "Conv2DBackpropInput", "Conv2DBackpropFilter", "Conv3D",
              "DepthwiseConv2dNative")
GRAPH_METHOD = ("graph: TensorFlow's op statistics (RegisterStatistics 'flops', as "
                "tf.compat.v1.profiler counts them; Einsum added) of the traced step at the "
                "per-replica batch, matrix-multiply and convolution ops "
                f"({', '.join(MATRIX_OPS)}); per example")


def _einsum_flops(equation: str, shapes: list[tuple[int, ...]]) -> float:
    """FLOPs of an einsum: 2 x the product of all index sizes when an index is summed
    over (a contraction: multiply and add), the product alone otherwise."""
    inputs, _, output = equation.replace(" ", "").partition("->")
    terms = inputs.split(",")
    sizes: dict[str, int] = {}
    out_labels = set(output.replace("...", ""))
    for term, shape in zip(terms, shapes, strict=False):
        labels = list(term.replace("...", ""))
        if "..." in term:  # the ellipsis' dimensions, named from the right
            n = len(shape) - len(labels)
            at = term.index("...")
            ellipsis = [f"...{n - i}" for i in range(n)]
            labels = labels[:at] + ellipsis + labels[at:]
            if "..." in output:
                out_labels.update(ellipsis)
        for label, dim in zip(labels, shape, strict=False):
            sizes[label] = max(sizes.get(label, 1), int(dim))
    product = float(math.prod(sizes.values())) if sizes else 0.0
    contracted = any(label not in out_labels for label in sizes)
    return 2.0 * product if contracted and len(terms) >= 2 else product


def register_einsum(tf: Any) -> None:
    """Register TensorFlow's missing ``flops`` statistic for Einsum (once a process)."""
    from tensorflow.python.framework import graph_util, ops

    def stats(graph: Any, node: Any) -> Any:
        shapes = []
        for name in node.input:
            if name.startswith("^"):
                continue
            shape = graph_util.tensor_shape_from_node_def_name(graph, name)
            if not shape.is_fully_defined():
                return ops.OpStats("flops")
            shapes.append(tuple(int(d) for d in shape.as_list()))
        return ops.OpStats("flops", _einsum_flops(node.attr["equation"].s.decode(), shapes))

    with contextlib.suppress(KeyError):  # registered already in this process
        ops.RegisterStatistics("Einsum", "flops")(stats)


def executed_ops(graph: Any) -> set[str]:
    """Names of the ops ``graph``'s outputs depend on: what running it executes. A
    gradient function also builds gradients nobody asked for (a first layer's input
    gradient); they are pruned when the graph runs, and not counted here."""
    needed: set[str] = set()
    todo = [t.op for t in graph.outputs]
    while todo:
        op = todo.pop()
        if op.name in needed:
            continue
        needed.add(op.name)
        todo.extend(t.op for t in op.inputs)
        todo.extend(op.control_inputs)
    return needed


def graph_flops(tf: Any, fn: Callable[..., Any], *signature: Any) -> dict[str, float]:
    """FLOPs per op type of ``fn`` traced with ``signature`` (TensorSpecs): every op its
    outputs depend on that TensorFlow has a ``flops`` statistic for (ops without one
    are left out)."""
    from tensorflow.python.framework import ops

    register_einsum(tf)
    graph = tf.function(fn).get_concrete_function(*signature).graph
    needed = executed_ops(graph)
    by_type: dict[str, float] = {}
    for node in graph.as_graph_def().node:
        if node.name not in needed:
            continue
        try:
            value = ops.get_stats_for_node_def(graph, node, "flops").value
        except (ValueError, TypeError, KeyError):  # a shape it cannot read
            value = None
        if value:
            by_type[node.op] = by_type.get(node.op, 0.0) + float(value)
    return by_type


def matrix_flops(by_type: dict[str, float]) -> float:
    """The matrix-multiply and convolution share of ``graph_flops``' answer."""
    return sum(v for k, v in by_type.items() if k in MATRIX_OPS)


def traced_step_flops(tf: Any, model: Any, inputs: Any, batch: int, labels: Any = None,
                      loss: Callable[[Any, Any], Any] | None = None
                      ) -> tuple[dict[str, float], dict[str, float]]:
    """``(forward, training step)`` FLOPs per op type of ``model`` at ``batch``
    examples, ``inputs`` its InputSpecs and ``labels`` its LabelSpec or, for several
    heads, PackedLabels (workloads.synth: one float32 array of every head's columns),
    ``loss`` the per-example loss (the task's). Without labels (a model fed by its own
    dataset_fn) the loss is the mean output: the backward pass through the model is
    the same ops, but a gradient of unknown shape leaves a matmul uncounted (the MLP's
    logits layer: 0.3% of its step)."""
    specs = [tf.TensorSpec((batch, *s.shape), s.dtype) for s in inputs]
    if labels is not None and loss is not None:
        shape = (batch,) if labels.kind == "class_ids" else (batch, labels.width)
        specs.append(tf.TensorSpec(shape, "int32" if labels.kind == "class_ids" else "float32"))
    scored = len(specs) > len(inputs)

    def feed(xs: tuple[Any, ...]) -> Any:
        return xs[0] if len(xs) == 1 else {s.name: x for s, x in zip(inputs, xs, strict=True)}

    def forward(*args: Any) -> Any:
        xs = args[:len(inputs)]
        out = model(feed(xs), training=True)
        if scored and loss is not None:
            return tf.reduce_mean(loss(args[-1], out))
        return tf.reduce_mean(tf.cast(out, tf.float32))

    def step(*args: Any) -> Any:
        with tf.GradientTape() as tape:
            value = forward(*args)
        return tape.gradient(value, model.trainable_variables)

    return graph_flops(tf, forward, *specs), graph_flops(tf, step, *specs)


def task_stats(tf: Any, task: Any, spec: RunSpec,
               progress: Callable[[str], None] = lambda _: None) -> ModelStats:
    """The run's model statistics: parameters and gradient bytes from its variables,
    FLOPs by the task's method (``analytic`` for the built-in image and vector
    workloads, ``graph`` otherwise), and what the run fed it (``task.record``).
    A graph count that fails leaves the analytic one, with the reason in its method."""
    stats = model_stats(task.model)
    if task.flops == "graph":
        batch = spec.per_replica_batch
        try:
            fwd, train = traced_step_flops(tf, task.model, task.inputs, batch, task.labels,
                                           task.per_example_loss)
            stats = dataclasses.replace(
                stats, forward_flops_per_example=matrix_flops(fwd) / batch,
                train_flops_per_example=matrix_flops(train) / batch,
                flops_method=GRAPH_METHOD)
        except Exception as exc:
            why = f"{type(exc).__name__}: {(str(exc).strip().splitlines() or [''])[-1]}"
            progress(f"graph FLOPs failed, analytic count kept ({why})")
            stats = dataclasses.replace(
                stats, flops_method=f"{stats.flops_method} (the graph count failed: {why})")
    return dataclasses.replace(stats, **task.record)
