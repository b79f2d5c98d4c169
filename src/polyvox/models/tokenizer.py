"""The text tokenizer of every VoxCPM release: the checkpoint's `tokenizer.json` through the `tokenizers`
library, with no BOS and every multi-character CJK token split into single characters (as the reference
does), plus a writer for a small test tokenizer that the reference can load as well.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from tokenizers import AddedToken, Tokenizer, decoders, pre_tokenizers
from tokenizers.models import BPE
from tokenizers.trainers import BpeTrainer

_SPACE = "\u2581"
RESERVED_TOKENS = ("<|audio_start|>", "<|audio_end|>", "<|ref_audio_start|>", "<|ref_audio_end|>")
RESERVED_FIRST_ID = 101


def _is_cjk(text: str) -> bool:
    return all("\u4e00" <= c <= "\u9fff" for c in text)


class TextTokenizer:
    def __init__(self, tokenizer: Tokenizer, unk_token: str | None = None) -> None:
        self._tokenizer = tokenizer
        vocab = tokenizer.get_vocab(with_added_tokens=True)
        self._multichar = {t for t in vocab if len(t) >= 2 and _is_cjk(t)}
        unk = unk_token or getattr(tokenizer.model, "unk_token", None)
        self.unk_token_id = vocab.get(unk) if unk else None

    @classmethod
    def from_pretrained(cls, path: str | os.PathLike[str]) -> TextTokenizer:
        """Load `tokenizer.json` (a file, or the one in a checkpoint directory)."""
        path = Path(path)
        directory = path if path.is_dir() else path.parent
        tokenizer = Tokenizer.from_file(str(directory / "tokenizer.json" if path.is_dir() else path))
        unk_token = None
        config_file = directory / "tokenizer_config.json"
        if config_file.exists():
            unk = json.loads(config_file.read_text(encoding="utf-8")).get("unk_token")
            unk_token = unk.get("content") if isinstance(unk, dict) else unk
        return cls(tokenizer, unk_token)

    @property
    def vocab_size(self) -> int:
        return self._tokenizer.get_vocab_size(with_added_tokens=True)

    def _token_id(self, token: str) -> int:
        token_id = self._tokenizer.token_to_id(token)
        if token_id is None:
            if self.unk_token_id is None:
                raise ValueError(f"token {token!r} is not in the vocabulary and there is no unk token")
            return self.unk_token_id
        return token_id

    def encode(self, text: str) -> list[int]:
        ids: list[int] = []
        encoding = self._tokenizer.encode(text, add_special_tokens=False)
        for token, token_id in zip(encoding.tokens, encoding.ids, strict=True):
            bare = token.replace(_SPACE, "")
            if bare in self._multichar:
                ids.extend(self._token_id(c) for c in bare)
            else:
                ids.append(token_id)
        return ids

    __call__ = encode


_TEST_CORPUS = (
    "Hello world, this is a test of the speech server. 你好世界，今天天气很好。",
    "The quick brown fox jumps over the lazy dog 123 times in 2024. 我们喜欢中文语音合成。",
    "Numbers 0 1 2 3 4 5 6 7 8 9 and 42 or 3.14 are read aloud. 数字一二三四五六七八九十。",
    "A voice that speaks English and 中文 together: 你好 hello 世界 world 今天 today.",
    "我们今天说话，你们明天说话，他们天天说话。Speech synthesis makes voices from text.",
    "Please say the time: 10:30, then the date 2025-01-02. 请说时间和日期，谢谢。",
    '(A calm, warm voice) (年轻的女声) Really? Yes! It\'s "fine"; see [notes] & more.',
)


def build_test_tokenizer(out_dir: str | os.PathLike[str], vocab_size: int = 300) -> Path:
    """Write a small Llama-style BPE tokenizer (`tokenizer.json`, `tokenizer_config.json`,
    `special_tokens_map.json`) into `out_dir` and return it.

    Trained on mixed English/Chinese/digit text so that some tokens are multi-character CJK;
    every id is below `vocab_size` and ids 101-104 are the reserved audio tokens.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    specials = ["<unk>", "<s>", "</s>"]
    trainer_tok = Tokenizer(BPE(unk_token="<unk>", fuse_unk=True, byte_fallback=True))
    trainer_tok.pre_tokenizer = pre_tokenizers.Metaspace(
        replacement=_SPACE, prepend_scheme="first", split=False
    )
    trainer = BpeTrainer(
        vocab_size=vocab_size - len(RESERVED_TOKENS), special_tokens=specials, show_progress=False
    )
    trainer_tok.train_from_iterator(list(_TEST_CORPUS) * 4, trainer)
    trained = json.loads(trainer_tok.to_str())["model"]
    ordered = sorted(trained["vocab"], key=trained["vocab"].get)
    fillers = [f"<reserved_{i}>" for i in range(max(0, RESERVED_FIRST_ID - len(ordered)))]
    tokens = ordered[:RESERVED_FIRST_ID] + fillers + list(RESERVED_TOKENS) + ordered[RESERVED_FIRST_ID:]
    if len(tokens) > vocab_size:
        raise ValueError(f"vocab_size {vocab_size} is too small for the test tokenizer")
    pairs = (m.split(" ") if isinstance(m, str) else m for m in trained["merges"])
    merges = [(first, second) for first, second in pairs]

    tokenizer = Tokenizer(
        BPE(
            vocab={t: i for i, t in enumerate(tokens)},
            merges=merges,
            unk_token="<unk>",
            fuse_unk=True,
            byte_fallback=True,
        )
    )
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(
        replacement=_SPACE, prepend_scheme="first", split=False
    )
    tokenizer.decoder = decoders.Sequence(
        [decoders.Replace(_SPACE, " "), decoders.ByteFallback(), decoders.Fuse(), decoders.Strip(" ", 1, 0)]
    )
    tokenizer.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in specials])
    tokenizer.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in RESERVED_TOKENS])
    tokenizer.save(str(out / "tokenizer.json"))

    special_map = {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}
    config = {
        "tokenizer_class": "LlamaTokenizer",
        "add_bos_token": True,
        "add_eos_token": False,
        "legacy": False,
        "clean_up_tokenization_spaces": False,
        "model_max_length": 4096,
        **special_map,
    }
    (out / "tokenizer_config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
    (out / "special_tokens_map.json").write_text(json.dumps(special_map, indent=2), encoding="utf-8")
    return out
