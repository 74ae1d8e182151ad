"""TF-Hub export: the encoder SavedModel (with `.mlm`), the bundle with the preprocessing
SavedModel, TFLite encoders, and loading an export back into a checkpoint directory."""
