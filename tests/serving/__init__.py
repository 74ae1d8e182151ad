"""Running fine-tuned models: predict through every runtime, and serve."""
