"""Building blocks of the ALBERT encoder, named after the original TF1 variable scopes.

`AlbertEmbeddings` (word, position and token-type embeddings, LayerNorm, dropout),
`SelfAttention`, `FeedForward` and the post-LayerNorm `TransformerBlock` that `AlbertEncoder`
shares across layers; `LayerNorm` and `Dropout` as the original computes them.
"""

from albert_tf.lazy import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(
    __name__,
    {
        ".embeddings": "AlbertEmbeddings LayerNorm",
        ".attention": "SelfAttention",
        ".transformer_block": "FeedForward TransformerBlock",
        ".dropout": "Dropout",
    },
    globals(),
)
