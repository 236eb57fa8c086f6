"""Iteration order of a java.util.HashMap<String, String> (OpenJDK 8-17 semantics).

RocketMQ serialises message properties by iterating a HashMap
(MessageDecoder.messageProperties2String), so the order of the pairs in the
stored properties string is HashMap bucket order.  A byte-exact writer has to
replay the same put/remove calls on a model of that map; this module is the
model.

What is reproduced:

* String.hashCode over UTF-16 code units, spread as h ^ (h >>> 16);
* bucket = hash & (capacity - 1), table allocated lazily on the first put,
  default capacity 16 (or tableSizeFor(initialCapacity)), load factor 0.75;
* a new key is appended to the tail of its bucket's chain, a put of an
  existing key replaces the value in place, remove unlinks the node;
* resize doubles the table and splits every chain into a lo and a hi list
  that keep their relative order;
* a chain that grows past 8 nodes while the table is smaller than 64 makes
  treeifyBin() resize the table instead (and then the size check may resize
  again).

Limitation: real treeification (a chain of 9+ nodes in a table of 64 or
more) turns the bucket into a red-black tree whose iteration order depends on
the tree shape.  That needs 9 property names with the same low hash bits in
one message; no fixture comes near it.  The model then keeps plain chain
order and sets ``exact`` to False so a caller can tell.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Iterable, Iterator

from mqtool.formats.javastr import java_hash
from mqtool.formats.properties import encode_properties

DEFAULT_INITIAL_CAPACITY = 16
MAXIMUM_CAPACITY = 1 << 30
LOAD_FACTOR = 0.75
TREEIFY_THRESHOLD = 8
MIN_TREEIFY_CAPACITY = 64


@lru_cache(maxsize=8192)
def spread(key: str) -> int:
    """HashMap.hash(key): the String hashCode with its high half folded in, as unsigned 32 bits.

    Cached: map keys are property names, a small set that repeats on every message."""
    h = java_hash(key) & 0xFFFFFFFF
    return h ^ (h >> 16)


def table_size_for(cap: int) -> int:
    """HashMap.tableSizeFor: the smallest power of two >= cap (at least 1)."""
    n = 1
    while n < cap:
        n <<= 1
    return min(n, MAXIMUM_CAPACITY)


class JavaHashMap:
    """A str -> str map whose items() come out in java.util.HashMap order."""

    def __init__(self, initial_capacity: int | None = None, items: Iterable[tuple[str, str]] = ()):
        # Like Java, the table is created lazily; the constructor only sets the first threshold.
        self._initial = (
            DEFAULT_INITIAL_CAPACITY if initial_capacity is None else table_size_for(initial_capacity)
        )
        self._table: list[list[list]] | None = None  # buckets of [hash, key, value] nodes
        self._threshold = 0
        self._size = 0
        self.exact = True  # False once a bin would have been treeified
        for key, value in items:
            self.put(key, value)

    # -- internals -------------------------------------------------------------------------

    def _resize(self) -> None:
        old = self._table
        if old is None:
            new_cap = self._initial
        else:
            new_cap = len(old) << 1
        self._threshold = int(new_cap * LOAD_FACTOR)
        table: list[list[list]] = [[] for _ in range(new_cap)]
        if old is not None:
            old_cap = len(old)
            for index, chain in enumerate(old):
                # split into lo (same index) and hi (index + old_cap), keeping relative order
                for node in chain:
                    table[index + old_cap if node[0] & old_cap else index].append(node)
        self._table = table

    def _find(self, key: str):
        if self._table is None:
            return None
        h = spread(key)
        for node in self._table[h & (len(self._table) - 1)]:
            if node[0] == h and node[1] == key:
                return node
        return None

    # -- Map API ---------------------------------------------------------------------------

    @property
    def capacity(self) -> int:
        """The current table length (0 before the first put)."""
        return 0 if self._table is None else len(self._table)

    def put(self, key: str, value: str) -> str | None:
        """Map.put: returns the previous value; an existing key keeps its position."""
        if self._table is None:
            self._resize()
        h = spread(key)
        chain = self._table[h & (len(self._table) - 1)]
        for node in chain:
            if node[0] == h and node[1] == key:
                old, node[2] = node[2], value
                return old
        chain.append([h, key, value])
        if len(chain) > TREEIFY_THRESHOLD:  # binCount >= TREEIFY_THRESHOLD - 1
            if len(self._table) < MIN_TREEIFY_CAPACITY:
                self._resize()
            else:
                self.exact = False
        self._size += 1
        if self._size > self._threshold:
            self._resize()
        return None

    def remove(self, key: str) -> str | None:
        """Map.remove: unlink the node; the others keep their order."""
        if self._table is None:
            return None
        h = spread(key)
        chain = self._table[h & (len(self._table) - 1)]
        for i, node in enumerate(chain):
            if node[0] == h and node[1] == key:
                del chain[i]
                self._size -= 1
                return node[2]
        return None

    def get(self, key: str, default: str | None = None) -> str | None:
        node = self._find(key)
        return default if node is None else node[2]

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self._find(key) is not None

    def __getitem__(self, key: str) -> str:
        node = self._find(key)
        if node is None:
            raise KeyError(key)
        return node[2]

    def __setitem__(self, key: str, value: str) -> None:
        self.put(key, value)

    def __delitem__(self, key: str) -> None:
        if key not in self:
            raise KeyError(key)
        self.remove(key)

    def __len__(self) -> int:
        return self._size

    def items(self) -> list[tuple[str, str]]:
        """entrySet() order: bucket by bucket, each chain head to tail."""
        if self._table is None:
            return []
        return [(node[1], node[2]) for chain in self._table for node in chain]

    def keys(self) -> list[str]:
        return [key for key, _ in self.items()]

    def __iter__(self) -> Iterator[str]:
        return iter(self.keys())

    def __repr__(self) -> str:
        return f"JavaHashMap({self.items()!r})"


@lru_cache(maxsize=4096)
def java_order(names: tuple[str, ...]) -> tuple[str, ...]:
    """The iteration order of a default HashMap into which these keys were put in this order.

    A plain dict with the same insertion order models the map exactly (a removed and
    re-put key goes to the end of both, and of its bucket), so dicts of properties can
    be serialised in Java's order with this cached lookup instead of a JavaHashMap."""
    table = JavaHashMap()
    for name in names:
        table.put(name, "")
    return tuple(table.keys())


def properties_to_string(pairs, *, trailing_separator: bool = False) -> str:
    """MessageDecoder.messageProperties2String over a map in its Java iteration order.

    A JavaHashMap (or a list of pairs) is taken in its own order; a dict is taken
    in the order a HashMap with the same insertions would have.  None values are
    skipped; 4.x drops the final 0x02, 5.x keeps it.
    """
    if isinstance(pairs, dict):
        pairs = [(name, pairs[name]) for name in java_order(tuple(pairs))]
    return encode_properties(pairs, trailing_separator=trailing_separator)


def string_to_properties(text: str | None, initial_capacity: int | None = None) -> JavaHashMap:
    """MessageDecoder.string2messageProperties into a fresh HashMap (4.9.8: default size, 5.x: 128).

    Same skipping rules as mqtool.formats.properties.decode_properties; the
    order of put calls is the order of the pairs in the text.
    """
    result = JavaHashMap(initial_capacity)
    if not text:
        return result
    length = len(text)
    index = 0
    while index < length:
        end = text.find("\x02", index)
        if end < 0:
            end = length
        if end - index >= 3:
            sep = text.find("\x01", index)
            if index < sep < end - 1:
                result.put(text[index:sep], text[sep + 1:end])
        index = end + 1
    return result
