"""Subcommands of `albert-tf`; see `albert_tf.cli`."""
