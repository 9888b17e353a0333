"""The built-ins' hand-written FLOP counts against TensorFlow's count of the traced step.

    python -m scripts.flops_check [--size default|tiny] [--batch 4] [--workload mlp,cnn,...]

For each workload (default size unless told), per training example:

- ``hand``: workloads.flops' analytic count (Dense and convolution layers; what the
  results of the MLP, CNN and ResNet50 store);
- ``graph``: bench.child.backends.tf.flops' count of the step as TensorFlow traces it (forward and
  the sparse categorical cross-entropy on the logits, then the gradients of the
  trainable variables), matrix-multiply and convolution ops
  (MatMul, BatchMatMul, Einsum, Conv2D and its two gradients), each costed by
  TensorFlow's own op statistics from its shapes, only ops the gradients depend on;
- ``graph, all ops``: the same graph with every op TensorFlow has a FLOP statistic for
  (adds, multiplies, bias gradients, softmax, ...), the elementwise work besides;

then graph / hand. The Transformer's results use the graph count: its row shows what
the analytic rule would have stored (Dense layers counted once per example, not once
per token; attention's einsums not at all). Runs TensorFlow in this process (CPU).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any


def rows(names: list[str], size: str, batch: int) -> list[dict[str, Any]]:
    """One row of counts per workload (this process imports TensorFlow)."""
    import tensorflow as tf

    from bench.child.backends.tf.flops import MATRIX_OPS, matrix_flops, traced_step_flops
    from workloads import WORKLOADS
    from workloads.flops import model_stats
    from workloads.synth import LabelSpec

    out = []
    for name in names:
        w = WORKLOADS.get(name)
        params = w.resolve(size, {})
        model = w.build(params)
        hand = model_stats(model)
        labels = LabelSpec("class_ids", w.num_classes(params))

        def loss(y: Any, out: Any) -> Any:  # the custom loop's (bench.child.backends.tf.task)
            return tf.keras.losses.sparse_categorical_crossentropy(
                y, tf.cast(out, tf.float32), from_logits=True)

        fwd, train = traced_step_flops(tf, model, w.input_specs(params), batch, labels, loss)
        out.append({
            "workload": name, "params": hand.params,
            "hand_forward": hand.forward_flops_per_example,
            "hand_train": hand.train_flops_per_example,
            "graph_forward": matrix_flops(fwd) / batch,
            "graph_train": matrix_flops(train) / batch,
            "graph_all": sum(train.values()) / batch,
            "ops": {k: v / batch for k, v in sorted(train.items()) if k in MATRIX_OPS},
        })
        del model
        tf.keras.backend.clear_session()
    return out


def _g(x: float) -> str:
    return f"{x / 1e9:.4f} G" if x >= 1e7 else f"{x / 1e6:.4f} M"


def table(out: list[dict[str, Any]], size: str, batch: int) -> str:
    """The rows as a Markdown table, with the ops behind each graph count."""
    lines = [f"FLOPs per training example, {size} size, traced at batch {batch}", "",
             "| workload | params | hand fwd | graph fwd | hand train | graph train | "
             "graph / hand | graph, all ops |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in out:
        ratio = r["graph_train"] / r["hand_train"] if r["hand_train"] else float("nan")
        lines.append(f"| {r['workload']} | {r['params']:,} | {_g(r['hand_forward'])} | "
                     f"{_g(r['graph_forward'])} | {_g(r['hand_train'])} | "
                     f"{_g(r['graph_train'])} | {ratio:.4f} | {_g(r['graph_all'])} |")
    lines.append("")
    for r in out:
        ops = ", ".join(f"{k} {_g(v)}" for k, v in r["ops"].items())
        lines.append(f"- {r['workload']}: {ops}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m scripts.flops_check", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--workload", default="mlp,cnn,resnet50,transformer")
    p.add_argument("--size", default="default", choices=("default", "tiny"))
    p.add_argument("--batch", type=int, default=4)
    args = p.parse_args(argv)
    out = rows(args.workload.split(","), args.size, args.batch)
    print(table(out, args.size, args.batch))
    return 0


if __name__ == "__main__":
    sys.exit(main())
