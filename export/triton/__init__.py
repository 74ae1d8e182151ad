"""The writer of the Triton model repository that `export --finetuned DIR --triton` makes
(`repository`; it needs the `onnx` extra where it writes).

The repository's layout, the Python-backend model file the writer copies into it, the
environment Triton runs in and `albert-tf serve` are in `albert_tf.runtimes.triton`.
"""
