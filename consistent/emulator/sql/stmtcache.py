"""Per-server caches of the work done for a statement before it runs.

Query texts that come again verbatim keep their lexed statements and shapes, from the second
time they come: a text seen once (an INSERT with its own values) leaves only itself behind, not
the dozens of objects of its tokens and shape, which would live on until evicted and make every
garbage collection on the way walk them.  Then two levels keyed by
:class:`~consistent.emulator.sql.shapes.Shape`:

* **trees** — the parsed form of a shape's template text.  :meth:`StatementCache.parse` hands
  out a copy with the statement's own values put back, which is exactly the tree sqlglot
  parses from the statement (checked once per shape, when the entry is made);
* **plans** — what a DML handler computed from the tree for SQLite (SQL text templates, the
  tables it resolved, …), built by the handler itself (:mod:`.query`, :mod:`.writes`,
  :mod:`.insert`).  A plan is reused only while the session resolves every table name the
  handler resolved to the very same table definition, and only for shapes whose translation
  asked the session nothing else (no variables, no ``NOW()``…; see :mod:`.recording`).

An entry is made the second time a shape is seen, so statements that come once (DDL, test
set-ups, ad-hoc queries) cost nothing more than before.  Both levels are bounded LRUs.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Final, Generic, TypeVar

from sqlglot import exp
from sqlglot.serde import dump

from consistent.emulator.errors import SqlError
from consistent.emulator.sql.lexer import Statement, Token, split_statements, tokenize
from consistent.emulator.sql.shapes import Shape, shape_of
from consistent.emulator.sql.translate import parse_mysql

__all__ = ["LruCache", "StatementCache"]

K = TypeVar("K")
V = TypeVar("V")

_TREES: Final = 1024
_PLANS: Final = 1024
_SEEN: Final = 4096
_MAX_TEXT: Final = 4096  # longer query texts are not remembered verbatim


class LruCache(Generic[K, V]):
    """A bounded mapping that forgets the least recently used entry first."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._entries: OrderedDict[K, V] = OrderedDict()

    def get(self, key: K) -> V | None:
        """The entry for ``key`` (now the most recently used), or None."""
        value = self._entries.get(key)
        if value is not None:
            self._entries.move_to_end(key)
        return value

    def put(self, key: K, value: V) -> None:
        """Store an entry, forgetting the oldest one beyond the capacity."""
        self._entries[key] = value
        self._entries.move_to_end(key)
        if len(self._entries) > self.capacity:
            self._entries.popitem(last=False)

    def __len__(self) -> int:
        return len(self._entries)

    def values(self) -> list[V]:
        """The entries, least recently used first."""
        return list(self._entries.values())

    def clear(self) -> None:
        """Forget everything."""
        self._entries.clear()


_Path = tuple[tuple[str, int | None], ...]


@dataclass(frozen=True, slots=True)
class _Tree:
    """A shape's parsed template and where its slot literals are."""

    tree: exp.Expression
    paths: tuple[_Path, ...]

    def instantiate(self, values: tuple[str, ...]) -> exp.Expression:
        """A fresh copy of the tree with ``values`` in the slot literals."""
        tree = self.tree.copy()
        for path, value in zip(self.paths, values, strict=True):
            node: exp.Expr | None = _follow(tree, path)
            assert node is not None
            node.args["this"] = value
            while node is not None:  # cached structural hashes describe the sentinels
                node._hash = None
                node = node.parent
        return tree

    def copy(self) -> exp.Expression:
        """A fresh copy of the template itself (sentinels in the slots)."""
        return self.tree.copy()


def _follow(tree: exp.Expr, path: _Path) -> exp.Expr:
    node = tree
    for key, index in path:
        child = node.args[key]
        node = child[index] if index is not None else child
    return node


def _path(node: exp.Expr) -> _Path:
    steps: list[tuple[str, int | None]] = []
    parent = node.parent
    while parent is not None:
        key = str(node.arg_key)
        child = parent.args[key]
        index = None
        if isinstance(child, list):  # by identity: equality would hash the template
            index = next(i for i, item in enumerate(child) if item is node)
        steps.append((key, index))
        node, parent = parent, parent.parent
    return tuple(reversed(steps))


def _structure(tree: exp.Expression) -> list[dict[str, object]]:
    """The tree without source positions (which differ between a text and its template)."""
    return [{k: v for k, v in item.items() if k != "m"} for item in dump(tree)]


def _template_tree(shape: Shape, actual: exp.Expression) -> _Tree | None:
    """Parse a shape's template and check it gives back ``actual`` with the shape's values."""
    if not shape.values:
        return _Tree(actual.copy(), ())
    try:
        tree = parse_mysql(shape.template)
    except SqlError:
        return None
    wanted = dict(zip(shape.sentinels, shape.kinds, strict=True))
    found: dict[str, _Path] = {}
    for literal in tree.find_all(exp.Literal):
        text = literal.this
        if isinstance(text, str) and text in wanted:
            if text in found or literal.is_string != (wanted[text] == "s"):
                return None
            found[text] = _path(literal)
    if len(found) != len(wanted):
        return None
    entry = _Tree(tree, tuple(found[s] for s in shape.sentinels))
    if _structure(entry.instantiate(shape.values)) != _structure(actual):
        return None
    return entry


class StatementCache:
    """The caches of one server; see the module docstring."""

    def __init__(self, trees: int = _TREES, plans: int = _PLANS) -> None:
        self._texts: LruCache[str, tuple[Statement, ...]] = LruCache(trees)
        self._shapes: LruCache[str, Shape | bool] = LruCache(trees)
        self._trees: LruCache[str, _Tree | bool] = LruCache(trees)
        self._plans: LruCache[tuple[str, str], object] = LruCache(plans)
        self._seen: LruCache[tuple[str, str], bool] = LruCache(_SEEN)
        self._seen_texts: LruCache[str, bool] = LruCache(_SEEN)
        self._seen_statements: LruCache[str, bool] = LruCache(_SEEN)

    def split(self, sql: str) -> list[Statement]:
        """:func:`split_statements` of query text, remembered for texts that come again
        verbatim (``BEGIN``, ``COMMIT``, ``SELECT 1``, an applier's ``SET GTID_NEXT``…)."""
        if len(sql) > _MAX_TEXT:
            return split_statements(sql)
        known = self._texts.get(sql)
        if known is None:
            if not _again(self._seen_texts, sql):
                return split_statements(sql)
            known = tuple(split_statements(sql))
            self._texts.put(sql, known)
        return list(known)

    def shape(self, statement: Statement) -> Shape | None:
        """The shape of a lexed statement (None: not cacheable)."""
        text = statement.text
        if len(text) > _MAX_TEXT:
            return shape_of(text, statement.tokens)
        known = self._shapes.get(text)
        if known is None:
            if not _again(self._seen_statements, text):
                return shape_of(text, statement.tokens)
            known = shape_of(text, statement.tokens) or False
            self._shapes.put(text, known)
        return known if isinstance(known, Shape) else None

    def shape_of_text(self, text: str) -> Shape | None:
        """The shape of statement text that was not lexed as such (a rewritten statement)."""
        try:
            tokens: tuple[Token, ...] = tuple(tokenize(text))
        except SqlError:
            return None
        return shape_of(text, tokens)

    def seen_before(self, kind: str, key: str) -> bool:
        """Whether ``(kind, key)`` was asked about before (and note that it now was)."""
        return _again(self._seen, (kind, key))

    def parse(self, text: str, shape: Shape | None) -> exp.Expression:
        """The sqlglot tree of ``text`` (whose shape is ``shape``), parsed at most twice per
        shape; parse errors are raised as :func:`parse_mysql` raises them."""
        if shape is None:
            return parse_mysql(text)
        entry = self._trees.get(shape.key)
        if isinstance(entry, _Tree):
            return entry.instantiate(shape.values)
        tree = parse_mysql(text)
        if entry is None and self.seen_before("tree", shape.key):
            self._trees.put(shape.key, _template_tree(shape, tree) or False)
        return tree

    def template(self, shape: Shape) -> exp.Expression | None:
        """A copy of the parsed template of ``shape`` (sentinels in its slots), if known."""
        entry = self._trees.get(shape.key)
        return entry.copy() if isinstance(entry, _Tree) else None

    def plan(self, kind: str, shape: Shape) -> object | None:
        """The plan stored for a handler ``kind`` and a shape (False: known not cacheable)."""
        return self._plans.get((kind, shape.key))

    def store_plan(self, kind: str, shape: Shape, plan: object) -> None:
        """Remember a handler's plan for a shape (False: do not try again)."""
        self._plans.put((kind, shape.key), plan)

    def plans(self) -> int:
        """How many shapes have a plan now (for tests and diagnostics)."""
        return sum(1 for plan in self._plans.values() if plan is not False)

    def clear(self) -> None:
        """Forget every tree and plan (restart)."""
        self._texts.clear()
        self._shapes.clear()
        self._trees.clear()
        self._plans.clear()
        self._seen.clear()
        self._seen_texts.clear()
        self._seen_statements.clear()


def _again(seen: LruCache[K, bool], key: K) -> bool:
    """Whether ``key`` was seen before (and note that it now was)."""
    if seen.get(key) is not None:
        return True
    seen.put(key, True)
    return False
