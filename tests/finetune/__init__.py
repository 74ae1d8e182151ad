"""Fine-tuning: finetune and distill, task files, settings, windows over long texts, metrics, SQuAD,
multiple choice and tagging."""
