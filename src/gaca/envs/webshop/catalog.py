"""A generated WebShop catalogue and goal set, deterministic from a seed, with BM25 search.

The catalogue stands in for WebShop's ~1.18 M scraped products, which cannot be had offline. It is
built from ``catalog_data``: products of 30 types in 5 categories, each with a brand, a title, 2-5
attributes (some shown in the title, all in the feature bullets), option groups with a subset of
the type's values, and a price. About a third of the products get a *twin*: the same brand and
title with one attribute swapped, one option value removed or a higher price, so that search
results hold hard negatives that only reading the item page tells apart. A quarter of the
attributes outside the title are hidden (see ``SHOW_ATTRIBUTE_PROB``), as WebShop's mined
attributes often are, so keyword search does not always surface a satisfying product.

Goals follow WebShop's synthetic goals: a target product, 1-3 of its attributes, a value for most of
its option groups, and a price bound drawn from the multiples of 10 just above its price; the
instruction is written from ``TRAIN_TEMPLATES`` (train split) or the held-out ``EVAL_TEMPLATES``
(eval split). The two splits have disjoint target products (a fifth of the catalogue is eval).

Search ranks title, features and description with BM25 (``rank_bm25.BM25Okapi``) and returns the
top ``SEARCH_RETURN_N`` = 50 products with a positive score, as WebShop does.
"""

from __future__ import annotations

import logging
import math
import random
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Literal

import numpy as np

from gaca.envs.webshop.catalog_data import (
    BRAND_HEADS,
    BRAND_TAILS,
    BULLET_TAILS,
    DESCRIPTION_EXTRAS,
    DESCRIPTION_TEMPLATES,
    EVAL_TEMPLATES,
    PRODUCT_TYPES,
    REVIEW_LINES,
    TRAIN_TEMPLATES,
    ProductType,
)
from gaca.envs.webshop.reward import PRICE_RANGE, STOPWORDS, title_nouns, tokenize

logger = logging.getLogger(__name__)

SEARCH_RETURN_N = 50
"""Number of search results kept (WebShop's value)."""
EVAL_SHARE = 0.2
"""Share of products whose goals form the eval split."""
TWIN_PROB = 0.35
"""Probability that a generated product is followed by a hard-negative twin."""
SHOW_ATTRIBUTE_PROB = 0.75
"""Probability that an attribute not in the title is written in the feature bullets.

The others are *hidden*: in ``Product.attributes`` (which the reward checks, as WebShop's mined
``Attributes``, shown to no agent) but in none of the product's text, so no search finds them.
"""

Split = Literal["train", "eval"]


@dataclass(frozen=True)
class Product:
    """One catalogue product. Item access (``p["title"]``) mirrors WebShop's product dicts."""

    asin: str
    type_key: str
    category: str
    product_category: str
    query: str
    title: str
    nouns: tuple[str, ...]
    attributes: tuple[str, ...]
    bullet_points: tuple[str, ...]
    description: str
    options: dict[str, tuple[str, ...]]
    price: float
    reviews: tuple[tuple[float, str], ...] = field(default=())

    def __getitem__(self, key: str) -> Any:
        return getattr(self, key)


@dataclass(frozen=True)
class Goal:
    """One shopping goal: the instruction and what the reward checks."""

    index: int
    split: str
    asin: str  # the product the goal was drawn from (one of possibly several that satisfy it)
    instruction: str
    category: str  # top-level category (the task type)
    type_name: str  # product-type phrase ("shampoo")
    query: str
    product_category: str
    name: str  # the target's title
    nouns: tuple[str, ...]
    attributes: tuple[str, ...]
    options: dict[str, str]
    price_upper: float  # inf: no price bound
    template: int

    def __getitem__(self, key: str) -> Any:
        return getattr(self, key)


def _stem(tok: str) -> str:
    """Drop a plural ``s`` (``shoes`` -> ``shoe``); the search engine's only normalization."""
    return tok[:-1] if len(tok) > 3 and tok.endswith("s") and not tok.endswith("ss") else tok


def search_tokens(text: str) -> list[str]:
    """Index/query tokens: lowercase alphanumeric words, stopwords removed, plurals stripped."""
    return [_stem(t) for t in tokenize(text) if t not in STOPWORDS]


def _price(rng: random.Random, lo: float, hi: float) -> float:
    return float(math.floor(rng.uniform(lo, hi))) + rng.choice((0.99, 0.99, 0.49, 0.95))


def _title(brand: str, title_attrs: list[str], t: ProductType, suffix: str) -> str:
    words = [brand, *(a.title() for a in title_attrs), t.name.title(), suffix]
    return " ".join(words)


class _Generator:
    """Builds products of one catalogue from one ``random.Random``."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(f"gaca-webshop-catalogue-{seed}")
        self.asins: set[str] = set()

    def asin(self) -> str:
        alphabet = "ABCDEFGHJKLMNPQRSTUVWXYZ0123456789"
        while True:
            a = "B0" + "".join(self.rng.choice(alphabet) for _ in range(8))
            if a not in self.asins:
                self.asins.add(a)
                return a

    def render(self, t: ProductType, brand: str, attrs: list[str], n_title: int, suffix: str,
               options: dict[str, tuple[str, ...]], price: float, text_seed: int) -> Product:
        trng = random.Random(text_seed)
        title = _title(brand, attrs[:n_title], t, suffix)
        shown = attrs[:n_title] + [a for a in attrs[n_title:] if trng.random() < SHOW_ATTRIBUTE_PROB]
        bullets = [f"{a[0].upper()}{a[1:]} - {trng.choice(BULLET_TAILS)}" for a in shown]
        bullets.append(f"{t.name[0].upper()}{t.name[1:]} by {brand}, {trng.choice(BULLET_TAILS)}")
        trng.shuffle(bullets)
        description = trng.choice(DESCRIPTION_TEMPLATES).format(
            brand=brand, name=t.name, extra=trng.choice(DESCRIPTION_EXTRAS))
        reviews = tuple((float(trng.choice((3.0, 4.0, 4.0, 5.0, 5.0))), trng.choice(REVIEW_LINES))
                        for _ in range(trng.randint(1, 3)))
        product = Product(
            asin=self.asin(), type_key=t.key, category=t.category, product_category=t.path,
            query=t.query, title=title, nouns=tuple(title_nouns(title)), attributes=tuple(attrs),
            bullet_points=tuple(bullets), description=description, options=options, price=price,
            reviews=reviews,
        )
        _check_product(product, t)
        return product

    def base(self, t: ProductType, brands: list[str]) -> tuple[Product, dict[str, Any]]:
        rng = self.rng
        brand = rng.choice(brands)
        k = min(len(t.attributes), rng.choice((2, 3, 3, 4, 4, 5)))
        attrs = rng.sample(list(t.attributes), k)
        n_title = rng.randint(1, min(2, k))
        suffix = rng.choice(t.title_suffixes)
        options = {}
        for group, values in t.options.items():
            m = rng.randint(1, max(1, (len(values) * 2) // 3))  # a few of the type's colours/sizes
            chosen = set(rng.sample(list(values), m))
            options[group] = tuple(v for v in values if v in chosen)
        price = _price(rng, *t.price)
        spec = dict(brand=brand, attrs=attrs, n_title=n_title, suffix=suffix, options=options, price=price,
                    text_seed=rng.getrandbits(32))
        return self.render(t, **spec), spec

    def twin(self, t: ProductType, spec: dict[str, Any]) -> Product:
        """A hard negative: same brand and title, one attribute, option value or the price worse."""
        rng = self.rng
        spec = dict(spec, options=dict(spec["options"]), attrs=list(spec["attrs"]))
        kinds = ["price"]
        unused = [a for a in t.attributes if a not in spec["attrs"]]
        if unused and len(spec["attrs"]) > spec["n_title"]:
            kinds.append("attribute")
        if any(len(v) >= 2 for v in spec["options"].values()):
            kinds.append("option")
        kind = rng.choice(kinds)
        if kind == "attribute":  # swap one attribute the title does not show
            i = rng.randrange(spec["n_title"], len(spec["attrs"]))
            spec["attrs"][i] = rng.choice(unused)
        elif kind == "option":
            group = rng.choice(sorted(g for g, v in spec["options"].items() if len(v) >= 2))
            values = list(spec["options"][group])
            values.remove(rng.choice(values))
            spec["options"][group] = tuple(values)
        else:
            spec["price"] = _price(rng, spec["price"] + 10.0, spec["price"] + 30.0)
        spec["text_seed"] = rng.getrandbits(32)
        return self.render(t, **spec)


def _check_product(p: Product, t: ProductType) -> None:
    """The product's ``attributes`` must be exactly the pool attributes its text shows."""
    text = " ".join((p.title, *p.bullet_points, p.description)).lower()
    for a in t.attributes:
        if a not in p.attributes and a in text:
            raise AssertionError(f"{p.asin}: attribute {a!r} leaks into the text of {p.title!r}")


def generate_products(num_products: int, seed: int) -> list[Product]:
    """``num_products`` products spread evenly over the product types, deterministic in ``seed``."""
    if num_products < len(PRODUCT_TYPES):
        raise ValueError(f"num_products must be at least {len(PRODUCT_TYPES)}, got {num_products}")
    gen = _Generator(seed)
    products: list[Product] = []
    n_types = len(PRODUCT_TYPES)
    for i, t in enumerate(PRODUCT_TYPES):
        n_t = num_products // n_types + (1 if i < num_products % n_types else 0)
        names = sorted({(h + tl).capitalize() for h in BRAND_HEADS for tl in BRAND_TAILS})
        brands = gen.rng.sample(names, 10)
        made: list[Product] = []
        while len(made) < n_t:
            product, spec = gen.base(t, brands)
            made.append(product)
            if len(made) < n_t and gen.rng.random() < TWIN_PROB:
                made.append(gen.twin(t, spec))
        products.extend(made)
    gen.rng.shuffle(products)  # catalogue order breaks BM25 ties: keep it unrelated to generation
    return products


def _join_attrs(attrs: tuple[str, ...]) -> str:
    return attrs[0] if len(attrs) == 1 else ", ".join(attrs[:-1]) + " and " + attrs[-1]


def _instruction(template: str, goal_attrs: tuple[str, ...], t: ProductType, options: dict[str, str],
                 price_upper: float, split: str) -> str:
    if not options:
        opts = ""
    elif split == "train":  # WebShop's synthetic phrasing
        opts = " with " + ", and ".join(f"{k}: {v}" for k, v in options.items())
    else:  # held-out phrasing
        opts = "; " + " and ".join(f"{k} {v}" for k, v in options.items())
    price = "" if math.isinf(price_upper) else f", and price lower than {price_upper:.2f} dollars"
    text = template.format(a="\x00", attrs=_join_attrs(goal_attrs), name=t.name, opts=opts, price=price)
    nxt = text[text.index("\x00") + 1:]
    article = "" if t.plural else ("an " if nxt[:1] and nxt[0] in "aeiou" else "a ")
    if t.plural:
        text = text.replace(" that is ", " that are ").replace(" which is ", " which are ").replace(
            " it should be ", " they should be ")
    return " ".join(text.replace("\x00", article).split())


def generate_goals(products: list[Product], split: Split, seed: int) -> list[Goal]:
    """The goals of ``split``: one per target product of that split, in a seeded shuffled order."""
    if split not in ("train", "eval"):
        raise ValueError(f"split must be 'train' or 'eval', got {split!r}")
    types = {t.key: t for t in PRODUCT_TYPES}
    order = list(range(len(products)))
    random.Random(f"gaca-webshop-split-{seed}").shuffle(order)
    n_eval = max(1, round(EVAL_SHARE * len(products)))
    targets = order[:n_eval] if split == "eval" else order[n_eval:]
    templates = TRAIN_TEMPLATES if split == "train" else EVAL_TEMPLATES
    rng = random.Random(f"gaca-webshop-goals-{seed}-{split}")
    goals: list[Goal] = []
    for idx in targets:
        p = products[idx]
        t = types[p.type_key]
        n_att = min(len(p.attributes), rng.choice((1, 2, 2, 3, 3)))
        attrs = tuple(rng.sample(list(p.attributes), n_att))
        options = {g: rng.choice(v) for g, v in p.options.items() if rng.random() < 0.85}
        bounds = [x for x in PRICE_RANGE if x > p.price][:4]
        price_upper = max(rng.sample(bounds, 2)) if len(bounds) >= 2 else math.inf
        ti = rng.randrange(len(templates))
        goals.append(Goal(
            index=len(goals), split=split, asin=p.asin,
            instruction=_instruction(templates[ti], attrs, t, options, price_upper, split),
            category=p.category, type_name=t.name, query=p.query, product_category=p.product_category,
            name=p.title, nouns=p.nouns, attributes=attrs, options=options, price_upper=price_upper,
            template=ti,
        ))
    return goals


class Catalogue:
    """Products, their BM25 index and the goals of both splits (immutable after construction)."""

    def __init__(self, num_products: int = 2400, seed: int = 0) -> None:
        from rank_bm25 import BM25Okapi  # optional dependency of the webshop extra

        self.num_products = num_products
        self.seed = seed
        self.products = generate_products(num_products, seed)
        self.by_asin = {p.asin: p for p in self.products}
        corpus = [search_tokens(" ".join((p.title, *p.bullet_points, p.description))) for p in self.products]
        self._bm25 = BM25Okapi(corpus)
        self.goals: dict[str, list[Goal]] = {s: generate_goals(self.products, s, seed) for s in ("train", "eval")}
        self._search = lru_cache(maxsize=8192)(self._search_uncached)
        logger.info("webshop catalogue: %d products, %d train / %d eval goals (seed %d)", len(self.products),
                    len(self.goals["train"]), len(self.goals["eval"]), seed)

    def _search_uncached(self, key: tuple[str, ...]) -> tuple[str, ...]:
        if not key:
            return ()
        scores = self._bm25.get_scores(list(key))
        order = np.argsort(-scores, kind="stable")[:SEARCH_RETURN_N]
        return tuple(self.products[i].asin for i in order if scores[i] > 0)

    def search(self, query: str) -> tuple[str, ...]:
        """ASINs of the top-50 BM25 matches of ``query`` (ties broken by catalogue order)."""
        return self._search(tuple(search_tokens(query)))


@lru_cache(maxsize=4)
def get_catalogue(num_products: int = 2400, seed: int = 0) -> Catalogue:
    """The shared catalogue for ``(num_products, seed)``: built once per process, then reused."""
    return Catalogue(num_products, seed)


__all__ = [
    "SEARCH_RETURN_N",
    "Catalogue",
    "Goal",
    "Product",
    "generate_goals",
    "generate_products",
    "get_catalogue",
    "search_tokens",
]
