"""Model layer: the tree encoding is canonical and round-trips any name."""

from __future__ import annotations

import os

import pytest
from hypothesis import given
from hypothesis import strategies as st

from takeback.model import (
    DIR,
    FILE,
    LARGE,
    LINK,
    Entry,
    changed_entries,
    decode_tree,
    encode_tree,
)

names = (
    st.binary(min_size=1, max_size=12)
    .filter(lambda b: b"\0" not in b and b"/" not in b and b not in (b".", b".."))
    .map(os.fsdecode)
)
entries = st.builds(
    Entry,
    st.sampled_from([FILE, LINK, DIR, LARGE]),
    st.integers(0, 0o7777),
    st.binary(min_size=32, max_size=32).filter(any).map(bytes.hex),  # no real id is all zeros
    st.integers(0, 2**40),
).map(lambda e: e._replace(oid="") if e.kind == LARGE else e)


@given(st.dictionaries(names, entries, max_size=8))
def test_trees_round_trip(tree: dict[str, Entry]) -> None:
    assert decode_tree(encode_tree(tree)) == tree


@given(st.dictionaries(names, entries, max_size=8))
def test_encoding_does_not_depend_on_insertion_order(tree: dict[str, Entry]) -> None:
    backwards = dict(reversed(list(tree.items())))
    assert encode_tree(backwards) == encode_tree(tree)


@given(
    st.dictionaries(names, entries, max_size=8),
    st.dictionaries(names, entries, max_size=8),
    st.dictionaries(names, entries, max_size=4),
)
def test_changed_entries_are_every_entry_that_differs_and_no_other(
    old: dict[str, Entry], new: dict[str, Entry], shared: dict[str, Entry]
) -> None:
    # Two versions of a folder: what both hold alike is left out of both sides.
    before, after = {**old, **shared}, {**new, **shared}
    a, b = changed_entries(encode_tree(before), encode_tree(after))
    assert a == {n: e for n, e in before.items() if after.get(n) != e}
    assert b == {n: e for n, e in after.items() if before.get(n) != e}
    # An empty side (a folder made or removed): the other whole.
    assert changed_entries(b"", encode_tree(after)) == ({}, after)
    assert changed_entries(encode_tree(before), b"") == (before, {})


def test_changed_entries_refuses_bytes_that_are_not_a_tree() -> None:
    good = encode_tree({"a": Entry(FILE, 0o644, "ab" * 32, 3)})
    with pytest.raises(ValueError):
        changed_entries(good, good[:-5])
    with pytest.raises(ValueError):
        changed_entries(b"f 644 3 a", good)


def test_ids_are_stored_binary() -> None:
    tree = {"a": Entry(FILE, 0o644, "ab" * 32, 3)}
    assert len(encode_tree(tree)) == len(b"f 644 3 a\0") + 32
