"""Search queries built from the instruction alone: the search page's actions when the agent chooses.

WebShop's search page takes any text. An agent that chooses among admissible actions
(``rollout.action_mode="choose"``) needs a finite list there; WebShop's own imitation baseline
generates the query with a separate model trained on human queries, which we do not have. Instead,
with ``env.search_queries="instruction"``, the search page offers a few queries derived from the
instruction's text by fixed rules (no hidden goal information; they apply to WebShop's synthetic
instructions, "i need … with …, and price lower than … dollars", as well as to ours):

1. the whole instruction;
2. its request part: the text before the first options or price clause (`` with ``, ``; ``,
   ``, and price lower than``);
3. the key words of (2): without the words of asking and the function words (``ASKING_WORDS``).

Duplicates are dropped (first kept). The policy then learns which query finds the product.
"""

from __future__ import annotations

import re

#: Words that ask rather than describe ("i am looking for", "could you get me") or only connect.
ASKING_WORDS = frozenset(
    "i i'm im me my am is are be it its they them should could would you your please help need want wants "
    "buy get find looking searching search for to a an the that which this these some of".split()
)
_CLAUSE = re.compile(r"\s+with\s+|;\s*|,\s*and\s+price\s+lower\s+than\b|,\s*price\s+lower\s+than\b")


def request_part(instruction: str) -> str:
    """The instruction up to its first options or price clause, trimmed of punctuation."""
    head = _CLAUSE.split(instruction, maxsplit=1)[0]
    return " ".join(head.strip(" ,.;").split())


def key_words(text: str) -> str:
    """``text`` without ``ASKING_WORDS`` (and without commas)."""
    words = [w.strip(",.;:") for w in text.lower().split()]
    return " ".join(w for w in words if w and w not in ASKING_WORDS)


def instruction_queries(instruction: str) -> tuple[str, ...]:
    """The queries the search page offers for ``instruction`` (module docstring), at least one."""
    whole = " ".join(instruction.split())
    request = request_part(whole)
    candidates = (whole, request, key_words(request))
    return tuple(dict.fromkeys(q for q in candidates if q))


__all__ = ["ASKING_WORDS", "instruction_queries", "key_words", "request_part"]
