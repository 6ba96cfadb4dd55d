"""TOML and JSON from the user, parsed with their nesting and size bounded.

tomllib and json parse nested arrays and tables by recursion: a file of a few
kilobytes (``a = [[[[…]]]]``) takes them past the interpreter's recursion
limit, and dotted keys (``a.b.c.… = 1``, ``[a.b.c.…]``) make a document as
deep as the file is long without recursing at all, for the first code that
walks it recursively (``repr`` in an error line) to fail. So the text is
scanned first, once and in linear time (strings and comments skipped), for the
deepest ``[``/``{``, and the parsed document is measured without recursion;
either past :data:`MAX_DEPTH` is one :class:`TextLimitError` naming the file and
the line. Every robot file, description, fleet and JSON config the tool reads
goes through here; the readers bound the bytes they read (:data:`MAX_FILE`).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any

from fwbridge.protocols.errors import ConfigError

__all__ = ["MAX_DEPTH", "MAX_FILE", "TextLimitError", "check_nesting", "parse_json",
           "parse_json_bytes", "parse_toml", "read_limited"]

#: Deeper than any file of the tool's formats (a robot file is three levels deep at most).
MAX_DEPTH = 32
#: Bytes of a robot file or JSON config: far above a real one, far below what takes long.
MAX_FILE = 1 << 20


class TextLimitError(ConfigError):
    """A file nests arrays or tables too deeply, or is too large; names the file and line."""

    def __init__(self, source: str, line: int, reason: str) -> None:
        self.source = source
        self.line = line
        self.reason = reason
        super().__init__(f"{source}:{line}: {reason}" if line else f"{source}: {reason}")


def _skip_toml_string(text: str, i: int) -> int:
    """The index after the TOML string that starts at ``i`` (or the end of its line, or of
    the text, when it is not closed: the parser reports that)."""
    q = text[i]
    n = len(text)
    if text.startswith(q * 3, i):
        j = i + 3
        while True:
            k = text.find(q * 3, j)
            if k < 0:
                return n
            b = k
            if q == '"':  # a quote after an odd number of backslashes is escaped
                while b > j and text[b - 1] == "\\":
                    b -= 1
            if (k - b) % 2 == 0:
                end = k + 3
                while end < n and end < k + 5 and text[end] == q:  # """" ends with a quote
                    end += 1
                return end
            j = k + 1
    j = i + 1
    while j < n:
        ch = text[j]
        if ch == "\n":
            return j
        if ch == "\\" and q == '"':
            j += 2
            continue
        if ch == q:
            return j + 1
        j += 1
    return n


def _skip_json_string(text: str, i: int) -> int:
    j, n = i + 1, len(text)
    while j < n:
        ch = text[j]
        if ch == "\\":
            j += 2
            continue
        if ch == '"':
            return j + 1
        j += 1
    return n


def check_nesting(text: str, source: str, kind: str = "toml", limit: int = MAX_DEPTH) -> None:
    """Raise :class:`TextLimitError` when ``text`` opens more than ``limit`` arrays or tables
    inside each other, or (TOML) a dotted key has more than ``limit`` parts (``kind``:
    ``toml`` or ``json``). One pass, no recursion."""
    toml = kind == "toml"
    skip = _skip_toml_string if toml else _skip_json_string
    stack: list[str] = []  # "[" array, "{" inline table or object, "h" table header
    key = toml  # TOML: reading a key (its dots nest tables), not a value
    parts, line, i, n = 1, 1, 0, len(text)
    while i < n:
        ch = text[i]
        if ch == "\n":
            line += 1
            if not stack:
                key, parts = toml, 1
        elif ch == "#" and toml:
            j = text.find("\n", i)
            i = n if j < 0 else j
            continue
        elif ch == '"' or (ch == "'" and toml):
            j = skip(text, i)
            line += text.count("\n", i, j)
            i = j
            continue
        elif ch in "[{":
            header = toml and ch == "[" and key and not stack
            stack.append("h" if header else ch)
            if header and text.startswith("[", i + 1):  # [[array of tables]]
                i += 1
            key, parts = (True, 1) if header or ch == "{" else (False, parts)
            if len(stack) > limit:
                raise TextLimitError(source, line, f"arrays or tables nested more than "
                                     f"{limit} deep")
        elif ch in "]}":
            top = stack.pop() if stack else ""
            if top == "h" and text.startswith("]", i + 1):
                i += 1
            key = False
        elif key and ch == "." and toml:
            parts += 1
            if parts > limit:
                raise TextLimitError(source, line, f"a dotted key of more than {limit} parts "
                                     f"(tables nested more than {limit} deep)")
        elif key and ch == "=":
            key = False
        elif ch == "," and stack and stack[-1] == "{":
            key, parts = toml, 1
        i += 1


def _check_document(doc: Any, source: str, limit: int) -> None:
    """The parsed document's depth, measured without recursion (dotted keys nest tables
    without brackets)."""
    stack: list[tuple[Any, int]] = [(doc, 0)]
    while stack:
        value, depth = stack.pop()
        if depth > limit:
            raise TextLimitError(source, 0, f"tables or arrays nested more than {limit} deep "
                               "(dotted keys count too)")
        if isinstance(value, dict):
            stack.extend((v, depth + 1) for v in value.values())
        elif isinstance(value, list):
            stack.extend((v, depth + 1) for v in value)


def parse_toml(text: str, source: str, limit: int = MAX_DEPTH) -> dict[str, Any]:
    """``tomllib.loads(text)`` with the nesting bounded (:class:`TextLimitError`); a syntax
    error is tomllib's ``TOMLDecodeError`` (a ``ValueError``), as before."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib
    check_nesting(text, source, "toml", limit)
    try:
        doc: dict[str, Any] = tomllib.loads(text)
    except RecursionError:  # the scan bounds the brackets; this stays a line, come what may
        raise TextLimitError(source, 0, "arrays or tables nested too deeply") from None
    _check_document(doc, source, limit)
    return doc


def parse_json(text: str, source: str, limit: int = MAX_DEPTH, *,
               parse_constant: Callable[[str], Any] | None = None) -> Any:
    """``json.loads(text)`` with the nesting bounded (:class:`TextLimitError`); a syntax error
    is ``json.JSONDecodeError`` (a ``ValueError``), as before. ``parse_constant``: as
    json's (NaN, Infinity)."""
    # No deeper than its openers: most texts (a record of counters) need no scan at all.
    if text.count("[") + text.count("{") > limit:
        check_nesting(text, source, "json", limit)
    try:
        return json.loads(text, parse_constant=parse_constant)
    except RecursionError:
        raise TextLimitError(source, 0, "arrays or objects nested too deeply") from None


def parse_json_bytes(data: bytes, source: str, size: int = MAX_FILE,
                     limit: int = MAX_DEPTH) -> Any:
    """:func:`parse_json` of ``data`` (UTF-8) already in memory (a record of a capture, a
    line from a peer): more than ``size`` bytes is a :class:`TextLimitError` before any
    decoding; text that is not UTF-8 or not JSON is a ``ValueError``, as before."""
    if len(data) > size:
        raise TextLimitError(source, 0, f"{len(data)} bytes of JSON, more than {size}")
    return parse_json(data.decode("utf-8"), source, limit)


def read_limited(read: Callable[[int], bytes], source: str, limit: int = MAX_FILE) -> bytes:
    """At most ``limit`` bytes through ``read`` (an open file's ``read``): more is one
    :class:`TextLimitError` (a device or an endless file is not read to its end)."""
    data = read(limit + 1)
    if len(data) > limit:
        raise TextLimitError(source, 0, f"more than {limit} bytes; a file of this kind is far "
                           "smaller (is it the right file?)")
    return data
