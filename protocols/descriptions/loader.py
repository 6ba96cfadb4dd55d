"""Frame descriptions: one TOML file says what a frame looks like on the wire.

From a :class:`FrameDescription` fwbridge builds the construct schema
(:mod:`fwbridge.protocols.descriptions.schema`), its codec and receiver
through one factory (:mod:`fwbridge.protocols.engine`), and, in
``codegen/``, C code, a Wireshark dissector and a DBC. ``docs/FRAMES.md`` documents the format.

A description with an error is refused with one :class:`DescriptionError`
naming the file, the line and the key. tomllib gives no line numbers, so
the line is found by a light scan of the text for the table and the key.
"""

from __future__ import annotations

import keyword
import math
import re
import sys
import unicodedata
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from fwbridge.protocols.checksums import algorithm
from fwbridge.protocols.descriptions.model import (
    TYPES,
    CanMessage,
    CanSignal,
    ChecksumSpec,
    FieldSpec,
    FrameDescription,
    LengthSpec,
    TypeInfo,
)
from fwbridge.protocols.descriptions.names import first_clash
from fwbridge.protocols.errors import ConfigError

__all__ = [
    "BYTE_ORDERS",
    "COUNTS",
    "HIDDEN_CATEGORIES",
    "SPANS",
    "TYPES",
    "CanMessage",
    "CanSignal",
    "ChecksumSpec",
    "DescriptionError",
    "FieldSpec",
    "FrameDescription",
    "LengthSpec",
    "TypeInfo",
    "from_doc",
    "load",
    "load_description",
    "loads",
]


BYTE_ORDERS = ("little", "big")
COUNTS = ("data", "payload", "frame")
SPANS = ("payload", "after-header", "all")
#: Names a field cannot take: the schema's own parts and the CLI's row keys.
RESERVED = frozenset({"header", "body", "trailer", "offset", "protocol", "frame", "defects"})
_NAME = re.compile(r"[a-z][a-z0-9_]{0,47}\Z")
_LABEL = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,47}\Z")
#: Names the generated C and Lua could not use as identifiers.
_KEYWORDS = (
    "auto break case char const continue default do double else enum extern float for goto if "
    "inline int long register restrict return short signed sizeof static struct switch typedef "
    "union unsigned void volatile while and elseif end false function in local nil not or "
    "repeat then true until")
FOREIGN_KEYWORDS = frozenset(_KEYWORDS.split())
MAX_BYTES_SIZE = 4096
MAX_HEADER = 8
#: Alternative headers a description may name: each is one more candidate a receiver
#: judges at every position, so a few.
MAX_ALT_HEADERS = 4
#: A frame's largest size (fixed, or with the largest data a length allows): receivers and
#: the generated C hold one whole frame.
MAX_FRAME = 65535
MAX_FIELDS = 1024
#: A description's text: far above any real one, well below what takes the loader long.
MAX_TEXT = 1 << 20
MAX_UNIT = 64
MAX_DOC = 1000
#: Text written into generated code (C comments, Lua and DBC strings) is one line of
#: printable characters without the ones those languages would read as an end: a C comment
#: ends at ``*/``, a DBC string at ``"`` (DBC has no escape), a Lua string at a newline.
_BAD_TEXT = re.compile(r'["\\]|\*/|/\*')
#: Unicode categories refused in text (and escaped by the generators, for descriptions made
#: in code): controls, format characters (the bidirectional overrides and isolates that make
#: code read otherwise than it compiles, zero widths), surrogates, private use, line and
#: paragraph separators.
HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Zl", "Zp"})


class DescriptionError(ConfigError):
    """A description is invalid: names the file, the line and the key."""

    def __init__(self, source: str, line: int, key: str, reason: str) -> None:
        self.source = source
        self.line = line
        self.key = key
        self.reason = reason
        where = f"{source}:{line}: {key}" if line else source  # line 0: the file itself
        if len(reason) > 500:  # a value quoted from a hostile file: the line stays readable
            reason = f"{reason[:300]} … {reason[-150:]}"
        super().__init__(f"{where}: {reason}")


# -- locating keys in the text ---------------------------------------------------
class _Locator:
    """Line numbers of tables and keys, by a light scan (tomllib gives none)."""

    def __init__(self, text: str) -> None:
        table_re = re.compile(r"\s*(\[\[?)\s*([A-Za-z0-9_.\-\"]+)\s*\]\]?")
        key_re = re.compile(r"\s*\"?([A-Za-z0-9_\-]+)\"?\s*=")
        self.tables: dict[tuple[str, int], int] = {}
        self.keys: dict[tuple[str, int, str], int] = {}
        counts: dict[str, int] = {}
        table, index = "", 0
        for lineno, line in enumerate(text.splitlines(), 1):
            m = table_re.match(line)
            if m and not line.lstrip().startswith("#"):
                table = m.group(2)
                if m.group(1) == "[[":
                    index = counts.get(table, 0)
                    counts[table] = index + 1
                else:
                    index = 0
                self.tables.setdefault((table, index), lineno)
                continue
            k = key_re.match(line)
            if k:
                self.keys.setdefault((table, index, k.group(1)), lineno)

    def line(self, table: str, index: int = 0, key: str | None = None) -> int:
        if key is not None and (table, index, key) in self.keys:
            return self.keys[(table, index, key)]
        return self.tables.get((table, index), 1)


class _Checker:
    """Validation with the context an error message needs."""

    def __init__(self, source: str, text: str | Callable[[], str]) -> None:
        self.source = source
        self._text = text
        self._where: _Locator | None = None

    @property
    def where(self) -> _Locator:
        """The line numbers, scanned on the first error (a valid description needs none)."""
        if self._where is None:
            text = self._text
            self._where = _Locator(text if isinstance(text, str) else text())
        return self._where

    def fail(self, table: str, index: int | None, key: str | None, reason: str,
             label: str | None = None) -> DescriptionError:
        line = self.where.line(table, index or 0, key)
        name = label or (table if index is None else f"{table}[{index + 1}]")
        return DescriptionError(self.source, line, f"{name}.{key}" if key else name, reason)

    def table(self, doc: Mapping[str, Any], name: str, allowed: set[str],
              index: int | None = None, label: str | None = None) -> None:
        for key in doc:
            if key not in allowed:  # a key is shown as the file has it, unless it hides
                shown = key if key.isprintable() else repr(key)  # characters: escaped then
                raise self.fail(name, index, shown, f"unknown key; allowed: "
                                f"{', '.join(sorted(allowed))}", label)

    def get(self, doc: Mapping[str, Any], table: str, index: int | None, key: str, kind: type,
            default: Any = None, label: str | None = None) -> Any:
        if key not in doc:
            if default is ...:
                raise self.fail(table, index, key, "required", label)
            return default
        value = doc[key]
        ok = isinstance(value, kind) and not (kind in (int, float) and isinstance(value, bool))
        if kind is float and isinstance(value, int) and not isinstance(value, bool):
            value, ok = float(value), True
        if not ok:
            raise self.fail(table, index, key, f"expected {_KIND[kind]}, got {value!r}", label)
        return value

    def text(self, doc: Mapping[str, Any], table: str, index: int | None, key: str,
             limit: int, label: str | None = None) -> str:
        """A free-text key (``doc``, ``unit``): a string generated code can carry as is."""
        value: str = self.get(doc, table, index, key, str, "", label)
        if len(value) > limit:
            raise self.fail(table, index, key, f"at most {limit} characters", label)
        bad = bad_text(value)
        if bad is not None:
            raise self.fail(table, index, key, f"{bad} is not allowed here: one line of "
                            "printable text without \", \\, /* or */ (it is written into C "
                            "comments and Lua and DBC strings)", label)
        return value


def code_point(ch: str) -> str:
    """``U+202E (RIGHT-TO-LEFT OVERRIDE)``: a character as an error line can show it."""
    name = unicodedata.name(ch, "")
    return f"U+{ord(ch):04X}" + (f" ({name})" if name else "")


def bad_text(value: str) -> str | None:
    """What makes ``value`` unfit for generated code (the first such character or
    delimiter, named by its code point), or None."""
    for ch in value:
        if unicodedata.category(ch) in HIDDEN_CATEGORIES:
            return code_point(ch)
    m = _BAD_TEXT.search(value)
    if m is None:
        return None
    return f"{m.group()!r} ({', '.join(code_point(c) for c in m.group())})"


_KIND = {str: "a string", int: "an integer", float: "a number", bool: "true or false",
         dict: "a table", list: "an array"}


def _hex(chk: _Checker, doc: Mapping[str, Any], key: str) -> bytes:
    text = chk.get(doc, "frame", None, key, str, "")
    try:
        return bytes.fromhex(text.replace("0x", "").replace(",", " "))
    except ValueError:
        raise chk.fail("frame", None, key, f"not hex bytes: {text!r} (write e.g. \"5A A5\")") \
            from None


def _alt_headers(chk: _Checker, frame: Mapping[str, Any], header: bytes) -> tuple[bytes, ...]:
    """``[frame].alt_headers``: hex strings like ``header``, each as long as it (a receiver
    reads the fields at the same offsets after either), distinct, at most a few."""
    raw = chk.get(frame, "frame", None, "alt_headers", list, [])
    if len(raw) > MAX_ALT_HEADERS:
        raise chk.fail("frame", None, "alt_headers", f"{len(raw)} headers; at most "
                       f"{MAX_ALT_HEADERS}")
    out: list[bytes] = []
    for text in raw:
        if not isinstance(text, str):
            raise chk.fail("frame", None, "alt_headers", f"expected hex strings such as "
                           f"\"FE FF\", got {text!r}")
        try:
            alt = bytes.fromhex(text.replace("0x", "").replace(",", " "))
        except ValueError:
            raise chk.fail("frame", None, "alt_headers", f"not hex bytes: {text!r} (write e.g. "
                           "\"5A A6\")") from None
        if len(alt) != len(header):
            raise chk.fail("frame", None, "alt_headers", f"{text!r} is {len(alt)} bytes; "
                           f"the header is {len(header)}")
        if alt == header or alt in out:
            raise chk.fail("frame", None, "alt_headers", f"{text!r} is given twice (or is the "
                           "header itself)")
        out.append(alt)
    return tuple(out)


def _name(chk: _Checker, value: str, table: str, index: int | None, key: str,
          label: str | None = None) -> str:
    if not _NAME.match(value) or keyword.iskeyword(value):
        raise chk.fail(table, index, key, f"{value!r} is not a name: lower-case letters, digits "
                       "and _, starting with a letter, at most 48", label)
    if value in FOREIGN_KEYWORDS:
        raise chk.fail(table, index, key, f"{value!r} is a keyword of the generated C or Lua "
                       "code; choose another name", label)
    return value


def _labels(chk: _Checker, raw: Any, f: FieldSpec, i: int, key: str, bits: bool) -> tuple[
        tuple[int, str], ...]:
    if not isinstance(raw, dict):
        raise chk.fail("field", i, key, "expected a table such as { 0 = \"idle\", 1 = \"run\" }")
    if not f.is_int or f.scaled:
        raise chk.fail("field", i, key, f"only for unscaled integer fields, not {f.type}")
    out: dict[int, str] = {}
    folded: set[str] = set()
    for k, v in raw.items():
        try:
            value = int(k, 0)
        except ValueError:
            raise chk.fail("field", i, key, f"{k!r} is not an integer (write 1 or 0x01)") from None
        if k.strip() != k:  # int() would take " 1" as 1
            raise chk.fail("field", i, key, f"{k!r} is not an integer (write 1 or 0x01)")
        if not f.info.lo <= value <= f.info.hi:
            raise chk.fail("field", i, key, f"{value} does not fit in {f.type}")
        if bits and (value <= 0 or value & (value - 1)):
            raise chk.fail("field", i, key, f"{value} is not a single bit (1, 2, 4, …)")
        if not isinstance(v, str) or not _LABEL.match(v) or v == "mro":  # mro: not in an Enum
            raise chk.fail("field", i, key, f"{v!r} is not a label (letters, digits and _, "
                           "starting with a letter, at most 48)")
        if v.lower() in folded:
            raise chk.fail("field", i, key, f"label {v!r} given twice (labels differing in "
                           "case only are one name in the generated C and Lua)")
        if value in out:
            raise chk.fail("field", i, key, f"{k!r} = {v!r}: the value {value} already has the "
                           f"label {out[value]!r}")
        folded.add(v.lower())
        out[value] = v
    return tuple(sorted(out.items()))


def _field(chk: _Checker, doc: Any, i: int, default_order: str, names: set[str]) -> FieldSpec:
    if not isinstance(doc, dict):
        raise chk.fail("field", i, None, "each [[field]] is a table")
    chk.table(doc, "field", {"name", "type", "byte_order", "scale", "offset", "unit", "enum",
                             "flags", "size", "doc"}, i)
    name = _name(chk, chk.get(doc, "field", i, "name", str, ...), "field", i, "name")
    if name in names:
        raise chk.fail("field", i, "name", f"{name!r} is declared twice")
    if name in RESERVED:
        raise chk.fail("field", i, "name", f"{name!r} is reserved ({', '.join(sorted(RESERVED))})")
    ftype = chk.get(doc, "field", i, "type", str, ...)
    if ftype not in TYPES:
        raise chk.fail("field", i, "type", f"unknown type {ftype!r}; choose one of "
                       f"{' '.join(TYPES)}")
    order = chk.get(doc, "field", i, "byte_order", str, default_order)
    if order not in BYTE_ORDERS:
        raise chk.fail("field", i, "byte_order", f"{order!r}: choose little or big")
    scale = chk.get(doc, "field", i, "scale", float)
    offset = chk.get(doc, "field", i, "offset", float)
    kind = TYPES[ftype].kind
    for key, v in (("scale", scale), ("offset", offset)):
        if v is not None and (kind == "bytes" or not math.isfinite(v)):
            raise chk.fail("field", i, key, f"{v!r}: needs a finite number on a numeric field")
    if scale == 0.0:
        raise chk.fail("field", i, "scale", "must not be 0")
    size = chk.get(doc, "field", i, "size", int)
    if size is not None and (kind != "bytes" or not 1 <= size <= MAX_BYTES_SIZE):
        raise chk.fail("field", i, "size", f"only bytes fields take a size (1..{MAX_BYTES_SIZE})"
                       if kind != "bytes" else f"{size} is not in 1..{MAX_BYTES_SIZE}")
    f = FieldSpec(name, ftype, order, scale, offset, chk.text(doc, "field", i, "unit", MAX_UNIT),
                  size=size, doc=chk.text(doc, "field", i, "doc", MAX_DOC))
    enum = _labels(chk, doc["enum"], f, i, "enum", False) if "enum" in doc else ()
    flags = _labels(chk, doc["flags"], f, i, "flags", True) if "flags" in doc else ()
    if enum and flags:
        raise chk.fail("field", i, "flags", "a field takes enum or flags, not both")
    return FieldSpec(name, ftype, order, scale, offset, f.unit, enum, flags, size, f.doc)


def _length(chk: _Checker, doc: Any, fields: list[FieldSpec]) -> LengthSpec:
    if not isinstance(doc, dict):
        raise chk.fail("length", None, None, "expected a table")
    chk.table(doc, "length", {"field", "counts", "data", "max"})
    names = [f.name for f in fields]
    lname = chk.get(doc, "length", None, "field", str, ...)
    if lname not in names:
        raise chk.fail("length", None, "field", f"no field named {lname!r} (fields: "
                       f"{', '.join(names)})")
    lf = fields[names.index(lname)]
    if lf.info.kind != "uint" or lf.scaled or lf.enum or lf.flags:
        raise chk.fail("length", None, "field", f"{lname!r} must be a plain unsigned integer "
                       f"field, not {lf.type}{' (scaled)' if lf.scaled else ''}")
    counts = chk.get(doc, "length", None, "counts", str, "data")
    if counts not in COUNTS:
        raise chk.fail("length", None, "counts", f"{counts!r}: choose one of {', '.join(COUNTS)}")
    dname = chk.get(doc, "length", None, "data", str, ...)
    if dname not in names:
        raise chk.fail("length", None, "data", f"no field named {dname!r}")
    df = fields[names.index(dname)]
    if df.type != "bytes" or df.size is not None:
        raise chk.fail("length", None, "data", f"{dname!r} must be a bytes field without size")
    if names.index(dname) < names.index(lname):
        raise chk.fail("length", None, "data", f"{dname!r} comes before its length field "
                       f"{lname!r}: a receiver could never know where it ends")
    cap = lf.info.hi
    limit = chk.get(doc, "length", None, "max", int, min(cap, 1024))
    if not 0 <= limit <= cap:
        raise chk.fail("length", None, "max", f"{limit} is not in 0..{cap} (the range of "
                       f"{lf.type})")
    return LengthSpec(lname, counts, dname, limit)


def _checksum(chk: _Checker, doc: Any, order: str, names: set[str]) -> ChecksumSpec:
    if not isinstance(doc, dict):
        raise chk.fail("checksum", None, None, "expected a table")
    chk.table(doc, "checksum", {"algorithm", "span", "byte_order", "name"})
    algo = chk.get(doc, "checksum", None, "algorithm", str, ...)
    try:
        canonical = algorithm(algo).name
    except ConfigError as exc:
        raise chk.fail("checksum", None, "algorithm", str(exc)) from None
    span = chk.get(doc, "checksum", None, "span", str, "payload")
    if span not in SPANS:
        raise chk.fail("checksum", None, "span", f"{span!r}: choose one of {', '.join(SPANS)}")
    border = chk.get(doc, "checksum", None, "byte_order", str, order)
    if border not in BYTE_ORDERS:
        raise chk.fail("checksum", None, "byte_order", f"{border!r}: choose little or big")
    name = _name(chk, chk.get(doc, "checksum", None, "name", str, "checksum"), "checksum", None,
                 "name")
    if name in names or name in RESERVED - {"checksum"}:
        raise chk.fail("checksum", None, "name", f"{name!r} is already a field's name")
    return ChecksumSpec(canonical, span, border, name)


def loads(text: str, source: str = "<string>") -> FrameDescription:
    """Parse and validate a description given as TOML text."""
    if len(text) > MAX_TEXT:
        raise DescriptionError(source, 0, "file", f"{len(text)} characters; a description has "
                               f"at most {MAX_TEXT}")
    if sys.version_info >= (3, 11):  # here: a shipped description is parsed already
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib
    from fwbridge.protocols.config_text import TextLimitError, parse_toml

    try:
        doc = parse_toml(text, source)
    except tomllib.TOMLDecodeError as exc:
        m = re.search(r"line (\d+)", str(exc))
        raise DescriptionError(source, int(m.group(1)) if m else 1, "toml",
                               f"not valid TOML: {exc}") from None
    except TextLimitError as exc:  # nested past any description's shape
        raise DescriptionError(source, exc.line or 1, "toml", exc.reason) from None
    return from_doc(doc, source, text)


def from_doc(doc: dict[str, Any], source: str,
             text: str | Callable[[], str]) -> FrameDescription:
    """Validate a description already parsed from TOML (``doc``, as ``tomllib`` gives it);
    ``text``: its TOML text (or how to get it), for the line numbers of an error."""
    chk = _Checker(source, text)
    chk.table(doc, "", {"frame", "field", "length", "checksum", "can"}, None, "description")
    frame = doc.get("frame")
    if not isinstance(frame, dict):
        raise chk.fail("frame", None, None, "a [frame] table is required")
    chk.table(frame, "frame", {"name", "header", "alt_headers", "trailer", "byte_order", "doc"})
    name = _name(chk, chk.get(frame, "frame", None, "name", str, ...), "frame", None, "name")
    order = chk.get(frame, "frame", None, "byte_order", str, "little")
    if order not in BYTE_ORDERS:
        raise chk.fail("frame", None, "byte_order", f"{order!r}: choose little or big")
    header, trailer = _hex(chk, frame, "header"), _hex(chk, frame, "trailer")
    can: tuple[CanMessage, ...] = ()
    can_signals: tuple[CanSignal, ...] = ()
    if "can" in doc:  # CAN's checks load with the first CAN description
        from fwbridge.protocols.descriptions.can import parse_can

        can, can_signals = parse_can(chk, doc["can"])
    if not can and not header:
        raise chk.fail("frame", None, "header", "required: the bytes every frame starts with "
                       "(only a CAN payload, with a [can] table, has none)")
    if len(header) > MAX_HEADER or len(trailer) > MAX_HEADER:
        raise chk.fail("frame", None, "header" if len(header) > MAX_HEADER else "trailer",
                       f"at most {MAX_HEADER} bytes")
    alt_headers = _alt_headers(chk, frame, header)
    raw_fields = doc.get("field", [])
    if not isinstance(raw_fields, list) or not raw_fields:
        raise chk.fail("field", None, None, "at least one [[field]] is required")
    if len(raw_fields) > MAX_FIELDS:
        where = chk.where
        line = where.tables.get(("field", 0)) or where.line("", 0, "field")
        raise DescriptionError(source, line, "field", f"{len(raw_fields)} fields; at most "
                               f"{MAX_FIELDS}")
    fields: list[FieldSpec] = []
    taken: set[str] = set()
    for i, fdoc in enumerate(raw_fields):
        fields.append(_field(chk, fdoc, i, order, taken))
        taken.add(fields[-1].name)
    length = _length(chk, doc["length"], fields) if "length" in doc else None
    for i, f in enumerate(fields):
        if f.type == "bytes" and f.size is None and (length is None or length.data != f.name):
            raise chk.fail("field", i, "type", f"bytes field {f.name!r} needs a size, or a "
                           "[length] table naming it as data: no field could follow it otherwise")
    checksum = (_checksum(chk, doc["checksum"], order, {f.name for f in fields})
                if "checksum" in doc else None)
    if alt_headers and length is None:
        raise chk.fail("frame", None, "alt_headers", "only a length-directed frame (with a "
                       "[length] table) takes alternative headers")
    desc = FrameDescription(name, header, trailer, order, tuple(fields), length, checksum, can,
                            can_signals, chk.text(frame, "frame", None, "doc", MAX_DOC), source,
                            alt_headers)
    if can:
        bad = "header" if header else "trailer" if trailer else "length" if length else None
        if bad:
            raise chk.fail(bad if bad == "length" else "frame", None,
                           None if bad == "length" else bad,
                           "a CAN payload has no header, trailer or length: the CAN frame "
                           "delimits it")
        if (desc.size or 0) > 8:
            raise chk.fail("can", None, None, f"a CAN payload has at most 8 bytes; the fields "
                           f"take {desc.size}")
        from fwbridge.protocols.descriptions.can import check_can_signals

        check_can_signals(chk, desc)
    if length is not None and length.max < desc.data_bias:
        raise chk.fail("length", None, "max", f"{length.max} is less than the {desc.data_bias} "
                       f"bytes the length counts besides {length.data!r}: no frame could be valid")
    if desc.max_size > MAX_FRAME + (desc.overhead if length else 0):
        raise chk.fail("length", None, "max", "frames are at most 64 KiB") if length else \
            chk.fail("field", None, None, f"the fields take {desc.fixed_payload} bytes: "
                     "frames are at most 64 KiB")
    clash = first_clash([desc])
    if clash is not None:
        table, index, key = clash.name.where
        raise chk.fail(table, index, key, clash.reason())
    return desc


def load(path: str | Path) -> FrameDescription:
    """Read and validate the description in the file ``path``."""
    p = Path(path)
    try:
        with p.open("rb") as fh:  # read no more than a description can hold (not /dev/zero)
            raw = fh.read(4 * MAX_TEXT + 1)
        if len(raw) > 4 * MAX_TEXT:
            raise DescriptionError(str(p), 0, "file", f"more than {4 * MAX_TEXT} bytes; a "
                                   f"description has at most {MAX_TEXT} characters")
        text = raw.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")  # as read_text
    except FileNotFoundError:
        raise DescriptionError(str(p), 0, "file", "no such file") from None
    except UnicodeDecodeError:
        raise DescriptionError(str(p), 0, "file", "not UTF-8 text") from None
    except OSError as exc:
        raise DescriptionError(str(p), 0, "file", exc.strerror or str(exc)) from None
    return loads(text, str(p))


def load_description(path: str | Path) -> FrameDescription:
    """The description in the TOML file ``path``, read and validated: what
    :func:`~fwbridge.protocols.engine.codec_for` and ``receiver_for`` take.

    A missing, unreadable or invalid file raises :class:`DescriptionError` (a
    :class:`~fwbridge.ConfigError`) naming the file, the line and the key."""
    return load(path)
