"""Tokenization: normalization, SentencePiece training, the Python and in-graph tokenizers, the
preprocessing SavedModel."""
