"""The ground floor of albert-tf's three packages: typed errors (`errors`), atomic outputs and
local-or-remote paths (`io_utils`), the installation and CPU environment (`environment`) and
lazy package exports (`lazy`).

It imports nothing of albert-tf. It sits in `preprocess/` because that is the lowest of the three
top-level packages (`albert_tf/` reads its tokenizer and data, `export/` reads both), so every
package can stand on it without an import running up. `albert_tf.errors`, `albert_tf.io_utils`,
`albert_tf.environment` and `albert_tf.lazy` keep their public names.
"""
