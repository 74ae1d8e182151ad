"""torch systems: Hugging Face transformers ALBERT on CPU, and raw torch matmul.

Each `build_*` returns `(step, note)` like `tf_systems`. Only called inside a worker process.
transformers, and TensorFlow (through `albert_tf.convert.hf`), are imported by the functions of
the HF systems only: a raw torch matmul worker loads neither.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from albert_tf.benchmarking.cases import Shape, make_batch, matmul_dims
from albert_tf.config import AlbertConfig

Step = Callable[[], object]
# How HF runs in bfloat16: weights cast with `model.to(torch.bfloat16)` ("cast") or float32
# weights under `torch.autocast("cpu", torch.bfloat16)` ("autocast"). Training always autocasts.
HF_BF16_MODES = ("cast", "autocast")


def configure_threads(intra: int, inter: int) -> None:
    torch.set_num_threads(intra)
    torch.set_num_interop_threads(inter)


def onednn_in_use() -> bool:
    """Whether torch may dispatch CPU ops to oneDNN (mkldnn built in and not disabled)."""
    return bool(torch.backends.mkldnn.is_available() and torch.backends.mkldnn.enabled)


def hf_config(config: AlbertConfig):
    import transformers

    return transformers.AlbertConfig(**hf_config_kwargs(config))


def hf_config_kwargs(config: AlbertConfig) -> dict:
    """`transformers.AlbertConfig`'s arguments for `config`: the config map of `export --hf`
    (`albert_tf.convert.hf.hf_config`; also written into the GPU export's manifest,
    benchmarks/gpu/, for a machine without albert_tf)."""
    from albert_tf.convert.hf import hf_config as config_json

    values = config_json(config, "AlbertForPreTraining")
    return {k: v for k, v in values.items() if k not in ("architectures", "model_type")}


def _tensors(config: AlbertConfig, shape: Shape) -> dict[str, torch.Tensor]:
    return {
        k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in make_batch(config, shape).items()
    }


def build_hf(
    config: AlbertConfig, dtype: str, case: str, shape: Shape, bf16_mode: str = "cast"
) -> tuple[Step, str]:
    """`transformers.AlbertModel` (inference) or `AlbertForPreTraining`'s modules with the MLM
    head on the masked positions only (train, Adam), default attention implementation."""
    import transformers

    bf16 = dtype == "bfloat16"
    t = _tensors(config, shape)
    encoder_inputs = dict(
        input_ids=t["input_word_ids"].long(),
        attention_mask=t["input_mask"].long(),
        token_type_ids=t["input_type_ids"].long(),
    )
    if case != "train":
        model = transformers.AlbertModel(hf_config(config)).eval()
        cast = bf16 and bf16_mode == "cast"
        if cast:
            model = model.to(torch.bfloat16)
        autocast = bf16 and not cast
        note = f"attn={model.config._attn_implementation}"
        if bf16:
            note += ", model.to(bfloat16)" if cast else ", torch.autocast bfloat16"

        def step():
            with torch.inference_mode(), torch.autocast("cpu", torch.bfloat16, enabled=autocast):
                return model(**encoder_inputs).pooler_output

        return step, note

    model = transformers.AlbertForPreTraining(hf_config(config)).train()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
    positions = t["masked_lm_positions"].long()
    mlm_ids = t["masked_lm_ids"].long()
    mlm_weights = t["masked_lm_weights"]
    sop_labels = t["sentence_order_label"].long()
    hidden = config.hidden_size

    def step():
        with torch.autocast("cpu", torch.bfloat16, enabled=bf16):
            out = model.albert(**encoder_inputs)
            index = positions[:, :, None].expand(-1, -1, hidden)  # [B, P, H]
            gathered = torch.gather(out.last_hidden_state, 1, index)
            mlm_logits = model.predictions(gathered).float()
            sop_logits = model.sop_classifier(out.pooler_output).float()
        ce = torch.nn.functional.cross_entropy(
            mlm_logits.reshape(-1, config.vocab_size), mlm_ids.reshape(-1), reduction="none"
        )
        flat_weights = mlm_weights.reshape(-1)
        mlm_loss = (ce * flat_weights).sum() / (flat_weights.sum() + 1e-5)
        loss = mlm_loss + torch.nn.functional.cross_entropy(sop_logits, sop_labels)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        return loss.item()

    note = f"attn={model.config._attn_implementation}, Adam"
    return step, note + (", torch.autocast bfloat16" if bf16 else "")


def build_torch_matmul(config: AlbertConfig, dtype: str, shape: Shape) -> tuple[Step, str]:
    m, k, n = matmul_dims(config, shape)
    torch_dtype = torch.bfloat16 if dtype == "bfloat16" else torch.float32
    generator = torch.Generator().manual_seed(0)
    a = torch.randn(m, k, generator=generator).to(torch_dtype)
    b = (torch.randn(k, n, generator=generator) / k**0.5).to(torch_dtype)

    def step():
        with torch.inference_mode():
            return a @ b

    return step, f"torch.matmul [{m},{k}]x[{k},{n}]"
