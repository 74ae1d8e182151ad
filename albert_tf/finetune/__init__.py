"""Fine-tuning: task data readers, metrics, task models, training, prediction and serving."""
