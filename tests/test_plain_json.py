"""``plain_json``: what the warm process's command side writes and reads is what ``json``
writes and reads, for every plain shape; anything else is a clear error."""

from __future__ import annotations

import json
import math
import random
import subprocess
import sys
from pathlib import Path

import pytest

from slm_rerank import plain_json

ROOT = Path(__file__).resolve().parents[1]

STRINGS = ["", "a", "retry backoff", "h\u00e9llo", "\u91cd\u8bd5", "\U0001f501", "tab\there",
           "nl\nret\r", "\x00\x01\x1f\x7f", '"quoted" \\back\\slash/', "\ud800", "\udcff",
           "\udc80\udcff surrogate-escaped bytes", "\u2028\u2029", "\ufeffbom", "x" * 5000,
           "\U0010ffff", "</script>", "\\u0041"]
NUMBERS: list[object] = [0, 1, -1, 2**31, -(2**63), 2**64 + 1, 10**300, 1.5, -0.0, 0.0, 1e300,
                         5e-324, 1e-7, 123456789.123456789, float("inf"), float("-inf"), True,
                         False, None, 1e16, 0.1 + 0.2]


def random_value(rng: random.Random, depth: int = 0) -> object:
    kind = rng.randrange(8 if depth < 4 else 4)
    if kind == 0:
        return rng.choice(STRINGS) + "".join(chr(rng.choice([rng.randrange(0x20),
                                                              rng.randrange(0x20, 0x7f),
                                                              rng.randrange(0x80, 0x3000),
                                                              rng.randrange(0xd800, 0xe000),
                                                              rng.randrange(0x10000, 0x110000)]))
                                             for _ in range(rng.randrange(6)))
    if kind == 1:
        return rng.choice(NUMBERS)
    if kind == 2:
        return rng.randrange(-(10**30), 10**30)
    if kind == 3:
        return rng.uniform(-1e6, 1e6)
    if kind in (4, 5):
        return [random_value(rng, depth + 1) for _ in range(rng.randrange(5))]
    if kind == 6:
        return tuple(random_value(rng, depth + 1) for _ in range(rng.randrange(3)))
    return {str(random_value(rng, 3)): random_value(rng, depth + 1)
            for _ in range(rng.randrange(5))}


def same(a: object, b: object) -> bool:
    """Equal, with NaN equal to itself (``json`` reads it as a float that is not)."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a):
        return math.isnan(b)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def test_what_it_writes_is_what_json_writes_for_every_plain_shape() -> None:
    rng = random.Random(30)
    values = [*STRINGS, *NUMBERS, [], {}, [[[]]], {"a": {"b": [1, {"c": None}]}},
              ["slm-rerank", "-q", "x", "--fast"], {"env": {"HOME": "/home/\udcff"}},
              [("HOME", "/h"), ("PATH", "/bin")], float("nan")]
    values += [random_value(rng) for _ in range(3000)]
    for value in values:
        assert plain_json.dumps(value) == json.dumps(value), value


def test_what_it_reads_is_what_json_reads() -> None:
    rng = random.Random(31)
    texts = [json.dumps(random_value(rng)) for _ in range(2000)]
    texts += [json.dumps(random_value(rng), ensure_ascii=False) for _ in range(300)]
    texts += [json.dumps(random_value(rng), indent=2) for _ in range(100)]
    texts += ['  {"a" :1 ,"b":[ true,false , null ]}\n\t', '"\\ud83d\\ude00"', '"\\ud83d"',
              '"\\u00e9\\n\\/\\b\\f"', "NaN", "-Infinity", "[Infinity]", "1E400", "-0",
              "12345678901234567890123456789", "1.0e-5", '{"a": 1, "a": 2}', "[]", "{}"]
    for text in texts:
        for given in (text, text.encode("utf-8", "surrogatepass")):
            assert same(plain_json.loads(given), json.loads(given)), text
    assert same(plain_json.loads("[NaN]"), [float("nan")])


@pytest.mark.parametrize("text", [
    "", " ", "{", "[1, 2", '{"a" 1}', '{"a": }', "[1,]", '{"a": 1,}', "nul", "tru",
    '"unterminated', '"bad escape \\q"', '"\\u12"', '"a\tb"', "01", "1.", ".5", "+1", "--1",
    "[1] [2]", '{"a": 1} x', "{'a': 1}", '{1: 2}', "\ufeff{}", "infinity", "nan", "0x10",
    "[" * 10 + "]" * 9,
])
def test_malformed_input_is_a_clear_error_where_json_refuses_it(text: str) -> None:
    with pytest.raises(ValueError):  # noqa: PT011 - json's own error is a ValueError too
        json.loads(text)
    with pytest.raises(plain_json.MalformedJSON, match=r": character \d+$"):
        plain_json.loads(text)
    data = text.encode("utf-8")
    try:
        expected = json.loads(data)
    except ValueError:
        with pytest.raises(plain_json.MalformedJSON):
            plain_json.loads(data)
    else:  # bytes opening with a UTF-8 byte-order mark: json reads them, and so does this
        assert plain_json.loads(data) == expected


def test_bytes_json_would_decode_otherwise_are_read_as_json_reads_them() -> None:
    for data in ['{"a": "\u00e9"}'.encode("utf-16"), '["x"]'.encode("utf-32"),
                 b'\xef\xbb\xbf{"a": 1}', '{"a": 1}'.encode("utf-16-le")]:
        assert plain_json.loads(data) == json.loads(data)
    with pytest.raises(ValueError, match="UTF-8"):
        plain_json.loads(b'{"a": "\xff"}')


def test_raw_decode_reads_one_value_and_leaves_what_follows() -> None:
    for text in ['{"a": [1, 2]} and more', "[1]]", '"x"y', "3 4", "null,"]:
        assert plain_json.raw_decode(text) == json.JSONDecoder().raw_decode(text)
    assert plain_json.raw_decode("xx[1] y", 2) == ([1], 5)
    with pytest.raises(plain_json.MalformedJSON, match="Unterminated string.*: character 1"):
        plain_json.raw_decode('{"a', 0)
    with pytest.raises(plain_json.MalformedJSON, match="expecting a value: character 4"):
        plain_json.raw_decode('[1, ]', 0)


def test_nesting_past_the_recursion_limit_raises_as_json_does() -> None:
    deep = "[" * 100_000 + "]" * 100_000
    with pytest.raises(RecursionError):
        json.loads(deep)
    with pytest.raises(RecursionError):
        plain_json.loads(deep)


@pytest.mark.parametrize("value", [{1: 2}, {None: 1}, {"a": {1, 2}}, b"bytes", object(),
                                   [1, {"k": bytearray(b"x")}]])
def test_a_shape_it_does_not_write_is_a_type_error(value: object) -> None:
    with pytest.raises(TypeError, match="not JSON serializable|keys must be str"):
        plain_json.dumps(value)


def test_the_command_side_imports_none_of_what_it_avoids() -> None:
    # without site (whose editable-install finders import some of these themselves)
    code = ("import sys; sys.path.insert(0, sys.argv[1]); "
            "import slm_rerank.cli, slm_rerank.warm_process.client, slm_rerank.hook.stdio, "
            "slm_rerank.piped, "
            "slm_rerank.query_limit; "
            "print(' '.join(sorted(set(sys.modules) & {'json', 'typing', 're', 'socket', "
            "'struct', 'collections.abc', 'selectors', 'enum'})))")
    done = subprocess.run([sys.executable, "-S", "-c", code, str(ROOT)], capture_output=True,
                          text=True, check=True, timeout=30)
    assert done.stdout.split() == []


def test_malformed_input_is_a_clear_error_before_json_is_imported() -> None:
    # the C scanner reports malformed input with json.decoder's error class; Python 3.11's
    # finds it only once imported (else a SystemError), and the command side imports no json
    code = ("import sys; sys.path.insert(0, sys.argv[1]); from slm_rerank import plain_json\n"
            "assert 'json' not in sys.modules\n"
            "for text in ['{\"a\": 1,,}', '\"a\\tb\"', '[1, 2', '\"\\\\q\"']:\n"
            "    try:\n"
            "        plain_json.loads(text)\n"
            "    except plain_json.MalformedJSON as exc:\n"
            "        print(exc)\n")
    done = subprocess.run([sys.executable, "-S", "-c", code, str(ROOT)], capture_output=True,
                          text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "Expecting property name enclosed in double quotes: character 8",
        "Invalid control character at: character 2", "Expecting ',' delimiter: character 5",
        "Invalid \\escape: character 1"]
