"""Serving fine-tuned models through Triton, several from one server: `albert-tf serve`.

`layout`: the model repository that `albert_tf.export.triton.repository` writes and the server
serves (its names, `config.pbtxt`, each task's outputs); `model`: the Triton Python-backend model
that runs its int8 classifier or SQuAD model in ONNX Runtime (the file the writer copies in as
`model.py`); `serve_env`: the
environment Triton runs in; `front`: the KServe v2 HTTP front; `server`: Triton behind the front.

`model` needs the `onnx` extra only where it runs the model; `serve_env` and `server` import
neither TensorFlow nor ONNX.
"""
