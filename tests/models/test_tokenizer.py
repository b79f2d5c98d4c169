"""TextTokenizer gives exactly the official ids (LlamaTokenizerFast + mask_multichar_chinese_tokens)."""

from __future__ import annotations

import pytest
from tokenizers import Tokenizer

from helpers.official import import_voxcpm, official_tokenizer
from polyvox.models.tokenizer import RESERVED_TOKENS, TextTokenizer

MIXED = [
    "你好世界，今天天气很好。Hello world, 123 times!",
    "我们喜欢中文语音合成 and English 3.14 together",
    "The date 2025-01-02 at 10:30: 请说时间和日期，谢谢。",
    "(A calm, warm voice)今天天天说话 42",
    "  leading and  double spaces 你们明天",
]


@pytest.fixture(scope="module")
def official_wrapper(tokenizer_dir):
    import_voxcpm()
    from voxcpm.model.utils import mask_multichar_chinese_tokens

    return mask_multichar_chinese_tokens(official_tokenizer(tokenizer_dir))


@pytest.mark.parametrize("text", MIXED)
def test_ids_match_official(text, tokenizer, official_wrapper):
    assert tokenizer.encode(text) == official_wrapper(text)


def test_multicharacter_chinese_tokens_are_split(tokenizer, tokenizer_dir):
    text = "今天天气很好"
    raw_tok = Tokenizer.from_file(str(tokenizer_dir / "tokenizer.json"))
    raw = raw_tok.encode(text, add_special_tokens=False)
    assert any(len(t.strip("\u2581")) >= 2 for t in raw.tokens)  # the BPE merged some characters
    ids = tokenizer.encode(text)
    assert ids[-len(text) :] == [raw_tok.token_to_id(c) for c in text]  # after the leading "\u2581"
    assert len(ids) <= len(text) + 1


def test_no_bos_and_empty_text(tokenizer):
    assert tokenizer.encode("") == []
    assert tokenizer.encode("hello")[0] != 1


def test_test_tokenizer_fits_tiny_vocab_with_reserved_audio_ids(tokenizer, tiny_config, tokenizer_dir):
    assert tokenizer.vocab_size <= tiny_config.lm_config.vocab_size
    ids = [i for text in MIXED for i in tokenizer.encode(text)]
    assert max(ids) < tiny_config.lm_config.vocab_size
    assert not {101, 102, 103, 104} & set(ids)
    raw = Tokenizer.from_file(str(tokenizer_dir / "tokenizer.json"))
    assert [raw.id_to_token(i) for i in (101, 102, 103, 104)] == list(RESERVED_TOKENS)


def test_loads_from_file_or_directory(tokenizer_dir):
    a = TextTokenizer.from_pretrained(tokenizer_dir)
    b = TextTokenizer.from_pretrained(tokenizer_dir / "tokenizer.json")
    assert a.encode(MIXED[0]) == b.encode(MIXED[0])
