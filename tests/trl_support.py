"""TRL on CPU with no model hub: a tiny randomly initialised Qwen2 model built from a config, the project's
Qwen2.5 tokenizer as a transformers tokenizer (with trl's training template, which marks what
`assistant_only_loss` trains), and what SFTTrainer trains: the labels of its prepared dataset and of every
batch a training step computes its loss on."""

from __future__ import annotations

from typing import Any

import torch
from transformers import Qwen2Config, Qwen2ForCausalLM
from trl import SFTConfig, SFTTrainer

from pipeline import load_tokenizer
from trl_templates import trl_template


def qwen_tokenizer():
    return load_tokenizer("qwen2.5").to_transformers(trl_template("qwen2_5_training.jinja"))


def tiny_model(tokenizer) -> Qwen2ForCausalLM:
    torch.manual_seed(0)
    config = Qwen2Config(vocab_size=len(tokenizer), hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=16384,
                         tie_word_embeddings=True)
    return Qwen2ForCausalLM(config)


class RecordingTrainer(SFTTrainer):
    """SFTTrainer that keeps the (input_ids, labels) of every batch it computes a training loss on."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.seen: list[tuple[list[int], list[int]]] = []

    def compute_loss(self, model, inputs, *args: Any, **kwargs: Any):
        if model.training:
            for ids, labels in zip(inputs["input_ids"].tolist(), inputs["labels"].tolist()):
                self.seen.append((ids, labels))
        return super().compute_loss(model, inputs, *args, **kwargs)


def config(output_dir: str, max_length: int, **overrides: Any) -> SFTConfig:
    settings = dict(output_dir=output_dir, max_length=max_length, max_steps=2, per_device_train_batch_size=1,
                    report_to="none", save_strategy="no", logging_steps=1, use_cpu=True, seed=0, learning_rate=1e-3,
                    gradient_checkpointing=False)
    settings.update(overrides)
    return SFTConfig(**settings)


def trained(labels: list[int]) -> list[int]:
    return [int(label != -100) for label in labels]
