"""The pronunciation lexicon: whole-word replacement, case sensitivity, the JSON file and its atomic saves."""

from __future__ import annotations

import json
import threading

import pytest

from polyvox.text.lexicon import Lexicon, LexiconEntry, LexiconError


def test_terms_are_replaced_as_whole_words_ignoring_case_by_default():
    lexicon = Lexicon([LexiconEntry("nginx", "engine x"), LexiconEntry("SQL", "sequel")])
    assert lexicon.apply("Nginx serves SQL results.") == "engine x serves sequel results."
    assert lexicon.apply("MySQL and nginxes") == "MySQL and nginxes"


def test_case_sensitive_entries_leave_other_spellings_alone():
    lexicon = Lexicon([LexiconEntry("US", "United States", case_sensitive=True)])
    assert lexicon.apply("The US told us.") == "The United States told us."


def test_longer_terms_win_and_chinese_terms_match_inside_chinese_text():
    lexicon = Lexicon([LexiconEntry("Voxcpm", "vox C P M"), LexiconEntry("VoxCPM2", "vox C P M two")])
    assert lexicon.apply("VoxCPM2 beats Voxcpm") == "vox C P M two beats vox C P M"
    chinese = Lexicon([LexiconEntry("单于", "缠于")])
    assert chinese.apply("匈奴的单于来了") == "匈奴的缠于来了"


def test_latin_terms_match_next_to_chinese_characters():
    lexicon = Lexicon([LexiconEntry("nginx", "engine x")])
    assert lexicon.apply("用nginx部署") == "用engine x部署"


def test_add_remove_and_list_entries():
    lexicon = Lexicon()
    lexicon.add("Siobhan", "shiv-awn")
    lexicon.add("PyPI", "pie P I", case_sensitive=True)
    assert [entry.term for entry in lexicon.entries()] == ["PyPI", "Siobhan"]
    assert lexicon.apply("Siobhan uploads to PyPI") == "shiv-awn uploads to pie P I"
    lexicon.add("Siobhan", "shi-vawn")
    assert lexicon.apply("siobhan") == "shi-vawn"
    assert lexicon.remove("Siobhan") is True
    assert lexicon.remove("Siobhan") is False
    assert lexicon.apply("Siobhan uploads") == "Siobhan uploads"


def test_file_round_trip_keeps_both_entry_forms(tmp_path):
    path = tmp_path / "lexicon.json"
    path.write_text(json.dumps({"nginx": "engine x", "IT": {"say": "I T", "case_sensitive": True}}))
    lexicon = Lexicon.load(path)
    assert lexicon.apply("nginx for IT, it works") == "engine x for I T, it works"
    lexicon.add("Kubernetes", "koo-ber-net-eez")
    lexicon.save()
    reloaded = Lexicon.load(path)
    assert reloaded.entries() == lexicon.entries()
    assert json.loads(path.read_text())["IT"] == {"say": "I T", "case_sensitive": True}
    assert [p.name for p in tmp_path.iterdir()] == ["lexicon.json"]


def test_missing_file_is_an_empty_lexicon_saved_on_demand(tmp_path):
    path = tmp_path / "sub" / "lexicon.json"
    lexicon = Lexicon.load(path)
    assert len(lexicon) == 0
    lexicon.add("Nguyen", "win")
    lexicon.save()
    assert Lexicon.load(path).apply("Mr Nguyen") == "Mr win"


def test_reload_picks_up_edits_to_the_file(tmp_path):
    path = tmp_path / "lexicon.json"
    path.write_text(json.dumps({"a1": "A one"}))
    lexicon = Lexicon.load(path)
    path.write_text(json.dumps({"b2": "B two"}))
    lexicon.reload()
    assert lexicon.apply("a1 b2") == "a1 B two"


@pytest.mark.parametrize(
    "content", ['["not", "an", "object"]', '{"term": 3}', '{" padded ": "x"}', '{"x": ""}', "{broken"]
)
def test_bad_files_are_refused_with_a_lexicon_error(tmp_path, content):
    path = tmp_path / "lexicon.json"
    path.write_text(content)
    with pytest.raises(LexiconError):
        Lexicon.load(path)


def test_a_failed_save_leaves_the_old_file_intact(tmp_path):
    path = tmp_path / "lexicon.json"
    lexicon = Lexicon([LexiconEntry("a1", "A one")], path=path)
    lexicon.save()
    before = path.read_text()
    lexicon.add("b2", "B two")
    lexicon._entries["bad"] = LexiconEntry("bad", object())  # type: ignore[arg-type]  # not JSON-serialisable
    with pytest.raises(TypeError):
        lexicon.save()
    assert path.read_text() == before
    assert [p.name for p in tmp_path.iterdir()] == ["lexicon.json"]


def test_concurrent_edits_and_reads_do_not_break_replacement():
    lexicon = Lexicon([LexiconEntry("fixed", "FIXED")])
    errors: list[BaseException] = []

    def editor(n: int):
        try:
            for i in range(200):
                lexicon.add(f"term{n}x{i}", "spoken")
                lexicon.remove(f"term{n}x{i}")
        except BaseException as exc:  # pragma: no cover - the failure being tested for
            errors.append(exc)

    def reader():
        try:
            for _ in range(400):
                assert lexicon.apply("a fixed point") == "a FIXED point"
        except BaseException as exc:  # pragma: no cover
            errors.append(exc)

    threads = [threading.Thread(target=editor, args=(n,)) for n in range(2)] + [
        threading.Thread(target=reader)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert [entry.term for entry in lexicon.entries()] == ["fixed"]


def test_the_digest_changes_with_the_entries_and_only_with_them():
    lexicon = Lexicon([LexiconEntry("a1", "A one")])
    before = lexicon.digest
    lexicon.add("b2", "B two")
    assert lexicon.digest != before
    lexicon.remove("b2")
    assert lexicon.digest == before
    lexicon.add("a1", "A one", case_sensitive=True)
    assert lexicon.digest != before
