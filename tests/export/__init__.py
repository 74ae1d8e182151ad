"""The formats: convert (TF1, transformers) and export (TF-Hub, transformers, keras-hub, ONNX,
TFLite), each tested the way a user loads it."""
