"""Building blocks of the ALBERT encoder, named after the original TF1 variable scopes.

`AlbertEmbeddings` (word, position and token-type embeddings, LayerNorm, dropout),
`SelfAttention`, `FeedForward` and the post-LayerNorm `TransformerBlock` that `AlbertEncoder`
shares across layers; `LayerNorm` and `Dropout` as the original computes them.
"""

from albert_tf.lazy import lazy_exports

_LAZY = {
    "AlbertEmbeddings": "albert_tf.layers.embeddings",
    "LayerNorm": "albert_tf.layers.embeddings",
    "SelfAttention": "albert_tf.layers.attention",
    "FeedForward": "albert_tf.layers.transformer_block",
    "TransformerBlock": "albert_tf.layers.transformer_block",
    "Dropout": "albert_tf.layers.dropout",
}

__all__ = [*_LAZY]
__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())
