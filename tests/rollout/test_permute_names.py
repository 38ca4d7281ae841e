"""SFT examples with the environment's names permuted (entity anonymisation)."""

from __future__ import annotations

import random
import re

from gaca.envs import EnvPool, named_spec
from gaca.envs.webshop import WebShopConfig, product_ids
from gaca.rollout import collect_expert_examples, permute_names

IDS = re.compile(r"\bb0[a-z0-9]{8}\b", re.IGNORECASE)


def test_a_bijection_per_example_that_keeps_case_and_everything_else():
    names = ["b0aaaaaaaa", "b0bbbbbbbb", "b0cccccccc", "b0dddddddd", "b0eeeeeeee", "b0ffffffff"]
    examples = [("list B0AAAAAAAA tea [SEP] B0BBBBBBBB [SEP] b0aaaaaaaa, b0bbbbbbbb",
                 "<action>click[b0aaaaaaaa]</action>"),
                ("search page", "<action>search[green tea]</action>")]
    seen = set()
    for seed in range(40):
        (prompt, response), untouched = permute_names(examples, names, random.Random(seed))
        assert untouched == examples[1]
        a, b = re.findall(r"\w+", prompt)[1], re.findall(r"\w+", prompt)[4]
        assert a.isupper() and b.isupper() and a != b and {a.lower(), b.lower()} <= set(names)
        assert prompt == f"list {a} tea [SEP] {b} [SEP] {a.lower()}, {b.lower()}"
        assert response == f"<action>click[{a.lower()}]</action>"
        seen.add(a.lower())
    assert len(seen) == len(names)  # every name is drawn, the original included
    again = permute_names(examples, names, random.Random(3))
    assert again == permute_names(examples, names, random.Random(3))


def test_permuted_expert_steps_stay_valid_steps_of_the_page():
    cfg = WebShopConfig(lowercase=True)
    spec = named_spec("webshop", split="train", expert=True, lowercase=True)
    with EnvPool([spec] * 2) as pool:
        data = collect_expert_examples(pool, list(range(6)), history_length=0, seed=0)
    names = product_ids(cfg)
    permuted = permute_names(data.examples, names, random.Random(0))
    clicks = 0
    for (prompt, response), (old_prompt, old_response) in zip(permuted, data.examples, strict=True):
        assert IDS.sub("ID", prompt) == IDS.sub("ID", old_prompt)  # only ids changed
        target = re.search(r"click\[(b0\w+)\]", response)
        if target:
            clicks += 1
            assert f"click[{target.group(1)}]" in prompt and target.group(1) in names  # still on the page
            assert response != old_response
    assert clicks >= 5
