"""The model core: config, layers, encoder, heads, checkpoints, the shipped model, parameter counts,
dtypes and the CPU speed paths."""
