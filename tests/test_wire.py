"""The relay's frames: what a caller sends is what the service reads, byte for byte."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from takeback import _wire


def _body(frame: bytes, kind: bytes) -> bytes:
    line, _, body = frame.partition(b"\n")
    assert _wire.header(line, kind) == len(body)
    return body


def test_a_call_arrives_as_it_was_sent_names_that_are_not_utf8_too() -> None:
    odd = os.fsdecode(b"caf\xe9-\xff")  # a folder or value the system gave as bytes
    argv = ["snapshot", "-m", "line one\nline two", odd]
    env = {"TAKEBACK_STORE": f"/tmp/{odd}", "EMPTY": "", "EQ": "a=b"}
    stdin = bytes(range(256)) * 3  # a hook payload: any bytes, newlines and NULs
    call = _wire.Call(
        _body(_wire.call_frame("ab" * 12, "/pkg", argv, f"/w/{odd}", env, stdin), _wire.CALL)
    )
    assert (call.claim, call.package, call.cwd) == ("ab" * 12, "/pkg", f"/w/{odd}")
    assert (call.argv, call.env, call.stdin) == (argv, env, stdin)
    none = _wire.Call(
        _body(_wire.call_frame("c" * 24, "/p", ["snapshot"], "/", {}, None), _wire.CALL)
    )
    assert none.stdin is None and none.env == {}
    empty = _wire.Call(
        _body(_wire.call_frame("c" * 24, "/p", ["snapshot"], "/", {}, b""), _wire.CALL)
    )
    assert empty.stdin == b""


def test_an_answer_arrives_as_it_was_sent() -> None:
    out, err = '{\n  "id": "x"\n}\n', os.fsdecode(b"warning: \xff\n")
    assert _wire.done(_body(_wire.done_frame(3, out, err), _wire.DONE)) == (3, out, err)


@pytest.mark.parametrize(
    "body",
    [
        b"5:abc",  # an item runs past the end
        b"x:abc",  # not a length
        b"3abc",  # no colon
        _wire.frame(_wire.CALL, [b"a", b"b"]).partition(b"\n")[2],  # too few items
        # a command line of 9 words with 1 given
        _wire.frame(_wire.CALL, [b"c", b"p", b"/", b"0", b"", b"9", b"x", b"0"]).partition(b"\n")[
            2
        ],
        # an environment of 2 pairs with 1 given
        _wire.frame(_wire.CALL, [b"c", b"p", b"/", b"0", b"", b"0", b"2", b"k", b"v"]).partition(
            b"\n"
        )[2],
    ],
)
def test_a_body_that_is_not_a_call_is_refused(body: bytes) -> None:
    with pytest.raises(ValueError):
        _wire.Call(body)


def test_headers_name_their_kind_and_a_length() -> None:
    assert _wire.header(b"takeback-run 12", _wire.CALL) == 12
    assert _wire.header(b"takeback-run 12", _wire.DONE) is None
    assert _wire.header(b"takeback-run -1", _wire.CALL) is None
    assert _wire.header(b"takeback-run", _wire.CALL) is None
    assert _wire.header(b'{"op": "status"}', _wire.CALL) is None


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


@given(st.dictionaries(st.text(), _json_values, max_size=6), st.sampled_from(["", " ", "\n"]))
def test_a_payload_is_read_as_json_reads_it(doc: dict[str, object], space: str) -> None:
    for raw in (json.dumps(doc), json.dumps(doc, ensure_ascii=False, indent=2)):
        data = (space + raw + space).encode()
        assert _wire.json_object(data) == json.loads(data)


@pytest.mark.parametrize(
    "raw",
    [b"", b"[]", b'"x"', b"1", b"{", b'{"a": 1} x', b'{"a": 1}{}', b"\xff{}", b"{'a': 1}"],
)
def test_what_is_not_one_json_object_is_none(raw: bytes) -> None:
    assert _wire.json_object(raw) is None
    # The same in a process that never loaded json (a hook call's), where the scanner
    # reports its errors differently.
    code = (
        f"import sys; from takeback import _wire; sys.exit(_wire.json_object({raw!r}) is not None)"
    )
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0


def test_json_constants_are_read_as_json_reads_them() -> None:
    got = _wire.json_object(b'{"n": NaN, "i": Infinity, "m": -Infinity, "e": 1e400}')
    assert got is not None
    assert got["n"] != got["n"] and got["i"] == float("inf") == got["e"]
    assert got["m"] == float("-inf")
