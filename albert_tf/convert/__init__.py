"""Converters from the original TF1 and Hugging Face ALBERT checkpoints to our checkpoint dir."""
