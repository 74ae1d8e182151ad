"""Serving a fine-tuned classifier through Triton: the model repository that `export
--finetuned DIR --triton` writes (`repository`, `model`), the environment Triton runs in
(`environment`) and `albert-tf serve`'s KServe v2 front over it (`server`).

`repository` and `model` need the `onnx` extra only where they write or run the model;
`environment` and `server` import neither TensorFlow nor ONNX.
"""
