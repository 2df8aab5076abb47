"""JSON for the warm process's command side, without importing the ``json`` package.

The command's side of the warm process (``warm_process.client``, ``wire``) and the prompt
hook's stdin reader (``hook.stdio``) run before anything else is imported, and importing
``json`` (its encoder, decoder and scanner modules) was a tenth of what that side cost. What
they send and read are plain shapes: objects with string keys, arrays (lists or tuples),
strings, integers, floats, booleans and null.

``dumps`` gives exactly what ``json.dumps(value)`` gives (its default arguments: ASCII only,
``", "`` and ``": "``, ``NaN`` and ``Infinity`` allowed) for those shapes, and raises
TypeError for anything else (another key or value type). ``loads`` and ``raw_decode`` are
``json.loads`` and ``json.JSONDecoder().raw_decode`` with the same C scanner (``_json``),
so a value reads the same, nesting past the recursion limit raises RecursionError as there,
and malformed input raises ``MalformedJSON`` (a ValueError) saying where (the scanner
reports it with ``json.decoder``'s error class, which Python 3.11's finds only once that is
imported: it is then, and the input scanned again). Bytes that are not
plain UTF-8 (a byte-order mark, UTF-16 or UTF-32) are handed to ``json`` itself, as is
everything when the C scanner is missing (another interpreter).
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

#: what ``json`` reads for these names (``parse_constant``)
_CONSTANTS = {"-Infinity": float("-inf"), "Infinity": float("inf"), "NaN": float("nan")}
_SPACE = " \t\n\r"  # JSON's whitespace, as ``json.decoder.WHITESPACE``


class MalformedJSON(ValueError):
    """Input that is not one JSON value (``pos``: the character where it went wrong)."""

    def __init__(self, message: str, pos: int) -> None:
        super().__init__(f"{message}: character {pos}")
        self.pos = pos


class _Context:
    """The settings ``json.JSONDecoder()`` gives its scanner."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = _CONSTANTS.__getitem__


_scan: Callable[[str, int], tuple[object, int]] | None
_quote: Callable[[str], str] | None
try:
    import _json

    _scan = _json.make_scanner(_Context())  # type: ignore[arg-type]  # duck-typed
    _quote = _json.encode_basestring_ascii
except (ImportError, AttributeError, TypeError):  # not CPython's: json does it all
    _scan = _quote = None


def dumps(value: object) -> str:
    """``json.dumps(value)`` for plain shapes (see the module); TypeError for others."""
    if _quote is None:
        import json

        return json.dumps(value)
    parts: list[str] = []
    _encode(value, parts, _quote)
    return "".join(parts)


def _encode(value: object, parts: list[str], quote: Callable[[str], str]) -> None:
    if isinstance(value, str):
        parts.append(quote(value))
    elif value is None:
        parts.append("null")
    elif value is True:
        parts.append("true")
    elif value is False:
        parts.append("false")
    elif isinstance(value, int):
        parts.append(int.__repr__(value))
    elif isinstance(value, float):
        parts.append(_float(value))
    elif isinstance(value, (list, tuple)):
        parts.append("[")
        for i, item in enumerate(value):
            if i:
                parts.append(", ")
            _encode(item, parts, quote)
        parts.append("]")
    elif isinstance(value, dict):
        parts.append("{")
        for i, (name, item) in enumerate(value.items()):
            if not isinstance(name, str):
                raise TypeError(f"keys must be str, not {type(name).__name__} ({name!r})")
            if i:
                parts.append(", ")
            parts.append(quote(name))
            parts.append(": ")
            _encode(item, parts, quote)
        parts.append("}")
    else:
        raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def _float(value: float) -> str:
    if value != value:
        return "NaN"
    if value == float("inf"):
        return "Infinity"
    if value == float("-inf"):
        return "-Infinity"
    return float.__repr__(value)


def raw_decode(text: str, index: int = 0) -> tuple[object, int]:
    """The JSON value starting at ``text[index]`` and where it ends (what follows is left),
    as ``json.JSONDecoder().raw_decode``; MalformedJSON when none starts there."""
    if _scan is None:
        import json

        try:
            return json.JSONDecoder().raw_decode(text, index)
        except json.JSONDecodeError as exc:
            raise MalformedJSON(exc.msg, exc.pos) from None
    try:
        try:
            return _scan(text, index)
        except SystemError:  # 3.11's scanner raises json.decoder's error only once imported
            import json.decoder  # noqa: F401 - for the scanner

            return _scan(text, index)
    except StopIteration as stop:
        raise MalformedJSON("expecting a value", stop.value) from None
    except ValueError as exc:  # the scanner's own error (json's JSONDecodeError)
        raise MalformedJSON(getattr(exc, "msg", str(exc)), getattr(exc, "pos", index)) from None


def loads(data: str | bytes) -> object:
    """``json.loads(data)``: one JSON value and nothing after it but whitespace."""
    if isinstance(data, (bytes, bytearray)):
        head = bytes(data[:4])
        if b"\0" in head or head.startswith((b"\xef\xbb\xbf", b"\xff\xfe", b"\xfe\xff")):
            return _json_loads(data)  # a byte-order mark, UTF-16 or UTF-32: as json reads it
        try:
            text = bytes(data).decode("utf-8", "surrogatepass")
        except UnicodeDecodeError as exc:
            raise MalformedJSON(f"not UTF-8 ({exc.reason})", exc.start) from None
    else:
        text = data
    if text.startswith("\ufeff"):
        raise MalformedJSON("a byte-order mark before the value", 0)
    start = len(text) - len(text.lstrip(_SPACE))
    value, end = raw_decode(text, start)
    rest = len(text) - len(text[end:].lstrip(_SPACE))
    if rest != len(text):
        raise MalformedJSON("more after the value", rest)
    return value


def _json_loads(data: bytes | bytearray) -> object:
    import json

    try:
        return json.loads(data)
    except json.JSONDecodeError as exc:
        raise MalformedJSON(exc.msg, exc.pos) from None
