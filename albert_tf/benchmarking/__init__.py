"""Side-by-side speed and memory benchmarks of albert-tf against its peers.

`run_benchmark(options)` measures, one subprocess per (system, dtype, case), our encoder,
tf-models-official's `AlbertEncoder`, Hugging Face `AlbertModel` (torch CPU) and keras-hub's
`AlbertBackbone`, plus the machine's own matmul throughput; `albert-tf benchmark` is the CLI.
"""

from albert_tf.benchmarking.runner import BenchmarkOptions, render_table, run_benchmark

__all__ = ["BenchmarkOptions", "render_table", "run_benchmark"]
