"""An offline byte-level tokenizer: every UTF-8 byte is a token, no merges, nothing to download.

Built with the ``tokenizers`` library and wrapped as a ``PreTrainedTokenizerFast``, so it is saved
beside the model (``tokenizer.json``) and reloaded with ``AutoTokenizer.from_pretrained(path)``.
Ids 0..255 are the bytes (in the GPT-2 byte-to-unicode alphabet order); specials follow.
"""

from __future__ import annotations

SPECIAL_TOKENS = {"pad_token": "<pad>", "bos_token": "<bos>", "eos_token": "<eos>", "unk_token": "<unk>"}
BYTE_VOCAB = 256


def build_byte_tokenizer():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from tokenizers.pre_tokenizers import ByteLevel
    from transformers import PreTrainedTokenizerFast

    vocab = {ch: i for i, ch in enumerate(sorted(ByteLevel.alphabet()))}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    return PreTrainedTokenizerFast(tokenizer_object=tok, **SPECIAL_TOKENS)


def byte_vocab_size() -> int:
    """Size of ``build_byte_tokenizer()``'s vocabulary: 256 bytes + 4 specials."""
    return BYTE_VOCAB + len(SPECIAL_TOKENS)
