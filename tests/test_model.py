"""Model layer: the tree encoding is canonical and round-trips any name."""

from __future__ import annotations

import os

from hypothesis import given
from hypothesis import strategies as st

from takeback.model import DIR, FILE, LARGE, LINK, Entry, decode_tree, encode_tree

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


def test_ids_are_stored_binary() -> None:
    tree = {"a": Entry(FILE, 0o644, "ab" * 32, 3)}
    assert len(encode_tree(tree)) == len(b"f 644 3 a\0") + 32
