"""The SQuAD task (`--task squad`): extractive question answering on SQuAD v1.1/v2.0 JSON.

- `data`: reading a SQuAD file (`read_squad`) and its features, windows of the context with
  doc stride (`build_squad_features`);
- `heads`: ALBERT's SQuAD 2.0 head (`SquadV2Head`); BERT's is the shared `models.TaskHead`, a
  dense layer to start and end logits that `Squad.forward` splits;
- `postprocess`: answers from model outputs, n-best lists and null odds, for either head;
- `task`: the `Squad` task the trainer, `albert-tf predict` and serving call, and `SquadData`,
  what it encodes a file into.

Its ONNX graph builder is `albert_tf.export.onnx.squad`: it builds on the ONNX exporter's
graph builder, which the layers put above fine-tuning.
"""

from __future__ import annotations

from albert_tf.finetune.tasks.squad.task import Squad, SquadData

__all__ = ["Squad", "SquadData"]
