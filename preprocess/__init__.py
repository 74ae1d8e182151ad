"""Tokenization and data preparation for ALBERT: normalization, SentencePiece training, the
plain-Python reference tokenizer, the in-graph tokenizer and the preprocessing SavedModel."""
