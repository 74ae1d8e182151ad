"""ALBERT's original tokenization as a transformers tokenizer (`AlbertOriginalTokenizer`).

`albert-tf export --hf` copies this file into the folder as `tokenization_albert_tf.py`;
`AutoTokenizer.from_pretrained(folder, trust_remote_code=True)` loads it and gives the original
google-research/albert ids on any text: whitespace collapsed, NFKD, combining marks dropped,
`str.lower` (with `do_lower_case`), SentencePiece, then the original's re-split of pieces that
end in a digit and a comma, which no `tokenizer.json` can express (it re-encodes such a piece
on its own, adding a "▁" the text does not have). It needs only `sentencepiece` and
transformers, not albert-tf. Without `trust_remote_code`, the folder's `tokenizer.json` is
loaded instead: the same ids except on those re-split pieces and on the order of tied pieces
of one repeated string (SentencePiece sums scores in float32).
"""

from __future__ import annotations

import os
import shutil
import unicodedata

import sentencepiece
from transformers import PreTrainedTokenizer

WORD_START = "▁"


def preprocess_text(text: str, lower: bool) -> str:
    """The original `tokenization.preprocess_text` (albert-tf's `albert_tf.preprocess.normalize`)."""
    if isinstance(text, str) and not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            text = text.encode("utf-8", errors="surrogatepass")
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    text = " ".join(text.split())
    text = unicodedata.normalize("NFKD", text)
    text = "".join(c for c in text if not unicodedata.combining(c))
    return text.lower() if lower else text


class AlbertOriginalTokenizer(PreTrainedTokenizer):
    """The original ALBERT tokenizer on `spiece.model`; inputs `[CLS] A [SEP] (B [SEP])`."""

    vocab_files_names = {"vocab_file": "spiece.model"}
    model_input_names = ["input_ids", "token_type_ids", "attention_mask"]

    def __init__(
        self,
        vocab_file: str,
        do_lower_case: bool = True,
        unk_token: str = "<unk>",
        sep_token: str = "[SEP]",
        pad_token: str = "<pad>",
        cls_token: str = "[CLS]",
        mask_token: str = "[MASK]",
        bos_token: str = "[CLS]",
        eos_token: str = "[SEP]",
        **kwargs,
    ) -> None:
        self.vocab_file = vocab_file
        # Not `self.do_lower_case`: transformers would lowercase text itself under that name.
        self.lowercase = do_lower_case
        self.sp_model = sentencepiece.SentencePieceProcessor(model_file=vocab_file)
        super().__init__(
            unk_token=unk_token,
            sep_token=sep_token,
            pad_token=pad_token,
            cls_token=cls_token,
            mask_token=mask_token,
            bos_token=bos_token,
            eos_token=eos_token,
            **kwargs,
        )
        self.init_kwargs["do_lower_case"] = do_lower_case

    @property
    def vocab_size(self) -> int:
        return self.sp_model.get_piece_size()

    def get_vocab(self) -> dict[str, int]:
        return {self.sp_model.id_to_piece(i): i for i in range(self.vocab_size)}

    def _tokenize(self, text: str, **kwargs) -> list[str]:
        pieces = []
        for piece in self.sp_model.encode(preprocess_text(text, self.lowercase), out_type=str):
            if len(piece) > 1 and piece[-1] == "," and piece[-2].isdigit():
                # The original re-encodes the piece without "," and "▁"; it meant to drop the
                # "▁" that adds, but compares str with bytes, so the "▁" stays.
                pieces += self.sp_model.encode(piece[:-1].replace(WORD_START, ""), out_type=str)
                pieces.append(piece[-1])
            else:
                pieces.append(piece)
        return pieces

    def _convert_token_to_id(self, token: str) -> int:
        return self.sp_model.piece_to_id(token)

    def _convert_id_to_token(self, index: int) -> str:
        return self.sp_model.id_to_piece(index)

    def convert_tokens_to_string(self, tokens: list[str]) -> str:
        return "".join(tokens).replace(WORD_START, " ").strip()

    def build_inputs_with_special_tokens(
        self, token_ids_0: list[int], token_ids_1: list[int] | None = None
    ) -> list[int]:
        first = [self.cls_token_id, *token_ids_0, self.sep_token_id]
        return first if token_ids_1 is None else [*first, *token_ids_1, self.sep_token_id]

    def get_special_tokens_mask(
        self,
        token_ids_0: list[int],
        token_ids_1: list[int] | None = None,
        already_has_special_tokens: bool = False,
    ) -> list[int]:
        if already_has_special_tokens:
            return super().get_special_tokens_mask(token_ids_0, token_ids_1, True)
        mask = [1, *([0] * len(token_ids_0)), 1]
        return mask if token_ids_1 is None else [*mask, *([0] * len(token_ids_1)), 1]

    def create_token_type_ids_from_sequences(
        self, token_ids_0: list[int], token_ids_1: list[int] | None = None
    ) -> list[int]:
        first = [0] * (len(token_ids_0) + 2)
        return first if token_ids_1 is None else first + [1] * (len(token_ids_1) + 1)

    def save_vocabulary(self, save_directory: str, filename_prefix: str | None = None) -> tuple:
        target = os.path.join(save_directory, (filename_prefix or "") + "spiece.model")
        if os.path.abspath(target) != os.path.abspath(self.vocab_file):
            shutil.copyfile(self.vocab_file, target)
        return (target,)
