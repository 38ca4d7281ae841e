"""A small PDDL problem reader and goal evaluator (what the fast engine needs of ALFWorld's PDDL).

Reads a problem the way fast-downward's translator does (``lisp_parser``): comments after ``;``
dropped, everything lower-cased, then nested lists. Returns the typed objects, the initial atoms
(``(= ...)`` numeric fluents dropped, as TextWorld's ``PddlState`` does) and the goal formula.

The goal is compiled into a :class:`Goal` that is checked against a fact lookup
``facts(pred) -> iterable of argument tuples``: ``and``, ``or``, ``not``, ``=``, ``exists``,
``forall``, ``imply`` and atoms, with typed quantifiers over the problem's objects (the
semantics of fast-downward's goal axioms). Existential variables are bound by joining over the
positive atoms of their conjunction (no enumeration of the whole object domain when an atom binds
the variable), which keeps ALFWorld's nested ``exists`` goals at a few microseconds.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

Sexp: TypeAlias = "str | list[Sexp]"
FactLookup = Callable[[str], Iterable[tuple[str, ...]]]


def tokenize(text: str) -> list[str]:
    """Tokens of a PDDL text: lower-cased, ``;`` comments removed, parentheses split off."""
    out: list[str] = []
    for line in text.split("\n"):
        line = line.split(";", 1)[0].lower()
        out.extend(line.replace("(", " ( ").replace(")", " ) ").split())
    return out


def parse_sexp(text: str) -> Sexp:
    """The nested list of a PDDL text (one top-level expression)."""
    tokens = tokenize(text)
    if not tokens or tokens[0] != "(":
        raise ValueError("PDDL text must start with '('")
    stack: list[list[Sexp]] = [[]]
    for tok in tokens:
        if tok == "(":
            stack.append([])
        elif tok == ")":
            if len(stack) < 2:
                raise ValueError("unbalanced ')' in PDDL text")
            done = stack.pop()
            stack[-1].append(done)
        else:
            stack[-1].append(tok)
    if len(stack) != 1 or len(stack[0]) != 1:
        raise ValueError("unbalanced '(' in PDDL text")
    return stack[0][0]


def typed_list(items: Sequence[Sexp], default: str = "object") -> list[tuple[str, str]]:
    """``a b - t c - u d`` -> [(a, t), (b, t), (c, u), (d, default)]."""
    out: list[tuple[str, str]] = []
    pending: list[str] = []
    i = 0
    while i < len(items):
        tok = items[i]
        if not isinstance(tok, str):
            raise ValueError(f"unexpected list in typed list: {tok}")
        if tok == "-":
            if i + 1 >= len(items) or not isinstance(items[i + 1], str):
                raise ValueError("'-' without a type in typed list")
            t = items[i + 1]
            out.extend((name, t) for name in pending)  # type: ignore[misc]
            pending = []
            i += 2
            continue
        pending.append(tok)
        i += 1
    out.extend((name, default) for name in pending)
    return out


@dataclass(frozen=True)
class Problem:
    """A parsed PDDL problem (all names lower-cased)."""

    name: str
    objects: dict[str, str]
    """object name -> type (declaration order)."""
    init: list[tuple[str, tuple[str, ...]]]
    """initial atoms (predicate, arguments), numeric fluents and equalities dropped."""
    goal: Sexp


def parse_problem(text: str) -> Problem:
    """Parse a PDDL problem text (see module docstring)."""
    tree = parse_sexp(text)
    if not isinstance(tree, list) or not tree or tree[0] != "define":
        raise ValueError("not a PDDL (define ...) expression")
    name, objects, init, goal = "", {}, [], None
    for part in tree[1:]:
        if not isinstance(part, list) or not part:
            continue
        head = part[0]
        if head == "problem":
            name = str(part[1])
        elif head == ":objects":
            for obj, typ in typed_list(part[1:]):
                objects[obj] = typ
        elif head == ":init":
            for atom in part[1:]:
                if not isinstance(atom, list) or not atom or not isinstance(atom[0], str):
                    raise ValueError(f"bad init atom {atom}")
                if atom[0] == "=":
                    continue
                if atom[0] == "not":
                    continue  # negative init literals are the closed-world default
                init.append((atom[0], tuple(str(a) for a in atom[1:])))
        elif head == ":goal":
            goal = part[1]
    if goal is None:
        raise ValueError("PDDL problem has no :goal")
    return Problem(name, objects, init, goal)


# ---------------------------------------------------------------------------------------------
# Goal evaluation
# ---------------------------------------------------------------------------------------------


class Goal:
    """A compiled goal formula; ``goal(facts)`` says whether it holds.

    Compilation flattens nested existentials (``exists x (and A (exists y B))`` becomes
    ``exists x y (and A B)`` when ``y`` is not free in ``A``; renaming is not needed for ALFWorld's
    goals, and a clash keeps the nesting). An existential is solved by backtracking: every
    conjunct whose variables are bound is checked as soon as possible, and the next variables are
    bound by the most selective positive atom (fewest unbound variables, static predicates first).
    """

    def __init__(self, formula: Sexp, objects: dict[str, str], static: frozenset[str] = frozenset()) -> None:
        self.formula = formula
        self.objects = objects
        self.static = static
        self._by_type: dict[str, list[str]] = {}
        for o, t in objects.items():
            self._by_type.setdefault(t, []).append(o)
        self.predicates = frozenset(self._predicates(formula))
        self._node = self._compile(formula)
        self._static_index: dict[str, dict[tuple[int, str], list[tuple[str, ...]]]] = {}

    def _predicates(self, f: Sexp) -> Iterable[str]:
        if isinstance(f, str) or not f:
            return
        head = f[0]
        if head in ("and", "or", "not", "imply"):
            for sub in f[1:]:
                yield from self._predicates(sub)
        elif head in ("exists", "forall"):
            yield from self._predicates(f[2])
        elif head != "=" and isinstance(head, str):
            yield head

    # -- compilation ------------------------------------------------------------------------
    # Nodes: ("atom", pred, args) | ("eq", a, b) | ("not", n) | ("and", [n]) | ("or", [n])
    #        | ("exists", [(var, type)], [conjunct nodes])

    def _compile(self, f: Sexp) -> tuple[Any, ...]:
        if isinstance(f, str):
            raise ValueError(f"bad formula {f!r}")
        if not f:
            return ("and", [])
        head = f[0]
        if head == "and":
            return ("and", [self._compile(sub) for sub in f[1:]])
        if head == "or":
            return ("or", [self._compile(sub) for sub in f[1:]])
        if head == "not":
            return ("not", self._compile(f[1]))
        if head == "imply":
            return ("or", [("not", self._compile(f[1])), self._compile(f[2])])
        if head == "=":
            return ("eq", str(f[1]), str(f[2]))
        if head in ("exists", "forall"):
            variables = typed_list(f[1])  # type: ignore[arg-type]
            body = f[2] if head == "exists" else ["not", f[2]]
            node = self._flatten(variables, [self._compile(c) for c in _conjuncts(body)])
            return node if head == "exists" else ("not", node)
        return ("atom", str(head), tuple(str(a) for a in f[1:]))

    def _flatten(self, variables: list[tuple[str, str]], conj: list[tuple[Any, ...]]) -> tuple[Any, ...]:
        """Pull nested existentials of ``conj`` up into this one (when their names are fresh)."""
        variables = list(variables)
        out: list[tuple[Any, ...]] = []
        todo = list(conj)
        while todo:
            c = todo.pop(0)
            if c[0] == "and":
                todo = list(c[1]) + todo
                continue
            if c[0] == "exists":
                names = {v for v, _ in variables}
                inner = {v for v, _ in c[1]}
                others = [d for d in out + todo if d is not c]
                if not (inner & names) and not any(inner & _free(d) for d in others):
                    variables += c[1]
                    todo = list(c[2]) + todo
                    continue
            out.append(c)
        return ("exists", variables, out)

    # -- evaluation -------------------------------------------------------------------------

    def __call__(self, facts: FactLookup) -> bool:
        return self._holds(self._node, {}, facts)

    def _holds(self, n: tuple[Any, ...], env: dict[str, str], facts: FactLookup) -> bool:
        kind = n[0]
        if kind == "atom":
            args = tuple(env.get(a, a) for a in n[2])
            return args in _as_set(facts(n[1]))
        if kind == "and":
            return all(self._holds(c, env, facts) for c in n[1])
        if kind == "or":
            return any(self._holds(c, env, facts) for c in n[1])
        if kind == "not":
            return not self._holds(n[1], env, facts)
        if kind == "eq":
            return env.get(n[1], n[1]) == env.get(n[2], n[2])
        return self._exists(n[1], n[2], env, facts)

    def _exists(self, variables: list[tuple[str, str]], conj: list[tuple[Any, ...]], env: dict[str, str],
                facts: FactLookup) -> bool:
        types = dict(variables)
        free_of = [(c, _free(c) & set(types)) for c in conj]

        def search(env: dict[str, str], unbound: frozenset[str], pending: list[tuple[Any, ...]]) -> bool:
            rest = []
            for c, fv in pending:
                if fv & unbound:
                    rest.append((c, fv))
                elif not self._holds(c, env, facts):
                    return False
            if not unbound:
                return True
            best = None
            for c, fv in rest:
                if c[0] == "atom":
                    key = (c[1] not in self.static, len(fv & unbound))
                    if best is None or key < best[0]:
                        best = (key, c)
            if best is None:  # no atom binds the rest: enumerate the typed domain
                v = min(unbound)
                for value in self._by_type.get(types[v], ()):
                    if search({**env, v: value}, unbound - {v}, rest):
                        return True
                return False
            atom = best[1]
            pattern = atom[2]
            for tup in self._candidates(atom[1], pattern, env, unbound, facts):
                if len(tup) != len(pattern):
                    continue
                new = dict(env)
                ok = True
                for p, val in zip(pattern, tup, strict=True):
                    if p in unbound:
                        got = new.get(p)
                        if got is None:
                            if self.objects.get(val) != types[p]:
                                ok = False
                                break
                            new[p] = val
                        elif got != val:
                            ok = False
                            break
                    elif new.get(p, p) != val:
                        ok = False
                        break
                if ok and search(new, unbound - set(pattern), rest):
                    return True
            return False

        inner = {k: v for k, v in env.items() if k not in types}
        return search(inner, frozenset(types), free_of)

    def _candidates(self, pred: str, pattern: tuple[str, ...], env: dict[str, str], unbound: frozenset[str],
                    facts: FactLookup) -> Iterable[tuple[str, ...]]:
        """Facts of ``pred`` that can match ``pattern``: a static predicate is looked up by its first
        known argument (an index built on first use; static facts are the same in every state)."""
        if pred not in self.static:
            return facts(pred)
        index = self._static_index.get(pred)
        if index is None:
            index = {}
            for tup in facts(pred):
                for pos, val in enumerate(tup):
                    index.setdefault((pos, val), []).append(tup)
            self._static_index[pred] = index
        for pos, p in enumerate(pattern):
            if p not in unbound:
                return index.get((pos, env.get(p, p)), ())
        return facts(pred)


def _free(n: tuple[Any, ...]) -> set[str]:
    """Free variables (``?x``) of a compiled node."""
    kind = n[0]
    if kind == "atom":
        return {a for a in n[2] if a.startswith("?")}
    if kind == "eq":
        return {a for a in n[1:] if a.startswith("?")}
    if kind in ("and", "or"):
        return set().union(*(_free(c) for c in n[1])) if n[1] else set()
    if kind == "not":
        return _free(n[1])
    bound = {v for v, _ in n[1]}
    return set().union(*(_free(c) for c in n[2])) - bound if n[2] else set()


def _conjuncts(f: Sexp) -> list[Sexp]:
    """Flatten nested ``and``s into a list of conjuncts."""
    if isinstance(f, list) and f and f[0] == "and":
        out: list[Sexp] = []
        for sub in f[1:]:
            out.extend(_conjuncts(sub))
        return out
    return [f]


def _as_set(items: Iterable[tuple[str, ...]]) -> Any:
    return items if isinstance(items, (set, frozenset)) else set(items)


__all__ = ["Goal", "Problem", "parse_problem", "parse_sexp", "tokenize", "typed_list"]
