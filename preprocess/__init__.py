"""Tokenization and data preparation for ALBERT: normalization, SentencePiece training, the
plain-Python reference tokenizer, the in-graph tokenizer and the preprocessing SavedModel.

`AlbertTokenizer` tokenizes as the original ALBERT does, in Python; `GraphTokenizer` does the
same in the TensorFlow graph; `save_preprocess_model` writes the TF-Hub preprocessing SavedModel;
`train_sentencepiece` trains a vocabulary; `create_pretraining_data` (in
`preprocess.pretraining_data`) writes the pretraining TFRecords.
"""

from albert_tf.lazy import lazy_exports

_LAZY = {
    "preprocess_text": "preprocess.normalize",
    "AlbertTokenizer": "preprocess.tokenizer",
    "GraphTokenizer": "preprocess.graph_tokenizer",
    "PreprocessModule": "preprocess.preprocess_model",
    "save_preprocess_model": "preprocess.preprocess_model",
    "train_sentencepiece": "preprocess.spm_train",
    "create_pretraining_data": "preprocess.pretraining_data",
    "build_default_corpus": "preprocess.corpus",
}

__all__ = [*_LAZY]
__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())
