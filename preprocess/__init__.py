"""Tokenization and data preparation for ALBERT: normalization, SentencePiece training, the
plain-Python reference tokenizer, the in-graph tokenizer and the preprocessing SavedModel.

`AlbertTokenizer` tokenizes as the original ALBERT does, in Python; `GraphTokenizer` does the
same in the TensorFlow graph; `save_preprocess_model` writes the TF-Hub preprocessing SavedModel;
`train_sentencepiece` trains a vocabulary; `create_pretraining_data` (in
`albert_tf.preprocess.pretraining_data`) writes the pretraining TFRecords.
"""

from albert_tf.lazy import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(
    __name__,
    {
        ".normalize": "preprocess_text",
        ".tokenizer": "AlbertTokenizer",
        ".graph_tokenizer": "GraphTokenizer",
        ".preprocess_model": "PreprocessModule save_preprocess_model",
        ".spm_train": "train_sentencepiece",
        ".pretraining_data": "create_pretraining_data",
        ".corpus": "build_default_corpus",
    },
    globals(),
)
