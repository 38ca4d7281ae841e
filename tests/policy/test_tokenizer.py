"""The tiny preset's fitted BPE tokenizer."""

from __future__ import annotations

import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gaca.policy import fit_tiny_tokenizer
from gaca.policy.tokenizer import TAG_TOKENS, tokenizer_key


def test_tags_are_single_tokens_and_bos_added(tiny_tokenizer):
    for tag in TAG_TOKENS:
        assert len(tiny_tokenizer(tag, add_special_tokens=False).input_ids) == 1
    ids = tiny_tokenizer("go to desk 1").input_ids
    assert ids[0] == tiny_tokenizer.bos_token_id
    assert tiny_tokenizer.padding_side == "left"
    assert len({tiny_tokenizer.pad_token_id, tiny_tokenizer.bos_token_id, tiny_tokenizer.eos_token_id}) == 3


def test_compact_on_its_corpus(tiny_tokenizer, corpus):
    text = corpus[0][0]
    assert len(tiny_tokenizer(text, add_special_tokens=False).input_ids) < len(text.encode()) / 2.5


@settings(max_examples=40, deadline=None)
@given(st.text(max_size=60))
def test_roundtrip_any_text(tiny_tokenizer, text):
    ids = tiny_tokenizer(text, add_special_tokens=False).input_ids
    assert tiny_tokenizer.decode(ids) == text


def test_cached_and_deterministic(tmp_path, corpus):
    texts = corpus[0][:30]
    a = fit_tiny_tokenizer(texts, 400, cache_dir=tmp_path)
    entries = os.listdir(tmp_path / "tokenizers")
    assert entries == [f"tiny-{tokenizer_key(texts, 400)}"]
    b = fit_tiny_tokenizer(texts, 400, cache_dir=tmp_path)  # from cache
    c = fit_tiny_tokenizer(texts, 400, cache_dir=tmp_path / "other")  # fitted again
    assert a.get_vocab() == b.get_vocab() == c.get_vocab()
    assert tokenizer_key(texts, 400) != tokenizer_key(texts, 401) != tokenizer_key(texts[1:], 400)


def test_rejects_bad_inputs(tmp_path):
    with pytest.raises(ValueError):
        fit_tiny_tokenizer([], 400, cache_dir=tmp_path)
    with pytest.raises(ValueError):
        fit_tiny_tokenizer(["abc"], 100, cache_dir=tmp_path)


def test_save_pretrained_roundtrip(tmp_path, tiny_tokenizer, corpus):
    from transformers import AutoTokenizer

    tiny_tokenizer.save_pretrained(tmp_path / "tok")
    back = AutoTokenizer.from_pretrained(tmp_path / "tok")
    text = corpus[0][1] + corpus[1][1]
    assert back(text).input_ids == tiny_tokenizer(text).input_ids
    assert back.padding_side == "left"
    assert (back.pad_token_id, back.bos_token_id, back.eos_token_id) == (
        tiny_tokenizer.pad_token_id, tiny_tokenizer.bos_token_id, tiny_tokenizer.eos_token_id
    )
    assert not getattr(back, "chat_template", None)


def test_whole_names_are_one_token_on_pages_and_in_actions(tmp_path, corpus):
    from transformers import AutoTokenizer

    from gaca.envs import ENVIRONMENTS
    from gaca.envs.webshop import WebShopConfig, get_catalogue

    cfg = WebShopConfig(lowercase=True, num_products=60)
    names = ENVIRONMENTS["webshop"].entity_names(cfg)
    assert names == sorted(a.lower() for a in get_catalogue(60, 0).by_asin) and len(names) == 60
    cased = ENVIRONMENTS["webshop"].entity_names(WebShopConfig(num_products=60))
    assert set(cased) == set(names) | {n.upper() for n in names}  # the pages' case and the actions'
    assert ENVIRONMENTS["alfworld"].entity_names(ENVIRONMENTS["alfworld"].config()) == []
    texts = corpus[0][:30]
    plain = fit_tiny_tokenizer(texts, 400, cache_dir=tmp_path)
    tok = fit_tiny_tokenizer(texts, 400, cache_dir=tmp_path, whole=names)
    assert len(tok) == len(plain) + len(names) and tokenizer_key(texts, 400, names) != tokenizer_key(texts, 400)
    name = names[7]
    page = f"back to search [SEP] {name} [SEP] some title [SEP] $4.49\n<action>click[{name}]</action>"
    ids = tok(page, add_special_tokens=False).input_ids
    assert ids.count(tok.convert_tokens_to_ids(name)) == 2 and tok.decode(ids) == page
    assert len(plain(name, add_special_tokens=False).input_ids) > 1
    tok.save_pretrained(tmp_path / "tok")
    assert AutoTokenizer.from_pretrained(tmp_path / "tok")(page).input_ids == tok(page).input_ids
