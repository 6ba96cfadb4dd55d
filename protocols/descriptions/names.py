"""The names generated code takes from descriptions, and the ones it must not take.

``gen c``, ``gen wireshark`` and ``gen dbc`` turn field names, frame names and
enum labels into identifiers (``IMU_MODE_IDLE``, ``imu_rx_feed``,
``fwbridge.imu.ax``, DBC signal names). Two parts of a description (or two
descriptions) that make the same identifier compile nowhere, or show one
value twice; a name the compiler already defines (``linux`` is the macro ``1``
under gcc's default GNU dialect, ``uint8`` makes ``uint8_t``) changes what the
code means. :func:`generated_names` lists, per target, every identifier the
generators emit for a description (the tests hold it to the generated text),
and :func:`first_clash` finds the first one taken twice or reserved.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from fwbridge.protocols.descriptions.model import FrameDescription

__all__ = [
    "C_RESERVED_MACROS",
    "C_RESERVED_NAMES",
    "DBC_KEYWORDS",
    "GenName",
    "NameClash",
    "clash_error",
    "first_clash",
    "generated_names",
    "label",
]

def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


#: Words a C compiler in its default mode reads as keywords (C99, GNU, C23).
_C_KEYWORDS = _words(
    "auto break case char const continue default do double else enum extern float for goto if "
    "inline int long register restrict return short signed sizeof static struct switch typedef "
    "union unsigned void volatile while asm typeof bool true false nullptr alignas alignof "
    "static_assert thread_local constexpr typeof_unqual")
#: Macros a compiler or the generated code's headers define without an underscore: any
#: token of the generated code with one of these names is rewritten. gcc and clang define
#: ``linux`` and ``unix`` (and ``i386`` on 32-bit x86) in the default GNU dialect.
C_RESERVED_MACROS = _words(
    "linux unix i386 i486 i586 i686 sun sparc mips vax arm thumb offsetof NULL "
    "INT8_MAX INT16_MAX INT32_MAX INT64_MAX INT8_MIN INT16_MIN INT32_MIN INT64_MIN UINT8_MAX "
    "UINT16_MAX UINT32_MAX UINT64_MAX INT_LEAST8_MAX INT_LEAST16_MAX INT_LEAST32_MAX "
    "INT_LEAST64_MAX INT_LEAST8_MIN INT_LEAST16_MIN INT_LEAST32_MIN INT_LEAST64_MIN "
    "UINT_LEAST8_MAX UINT_LEAST16_MAX UINT_LEAST32_MAX UINT_LEAST64_MAX INT_FAST8_MAX "
    "INT_FAST16_MAX INT_FAST32_MAX INT_FAST64_MAX INT_FAST8_MIN INT_FAST16_MIN INT_FAST32_MIN "
    "INT_FAST64_MIN UINT_FAST8_MAX UINT_FAST16_MAX UINT_FAST32_MAX UINT_FAST64_MAX INTPTR_MAX "
    "INTPTR_MIN UINTPTR_MAX INTMAX_MAX INTMAX_MIN UINTMAX_MAX PTRDIFF_MAX PTRDIFF_MIN SIZE_MAX "
    "SIG_ATOMIC_MAX SIG_ATOMIC_MIN WCHAR_MAX WCHAR_MIN WINT_MAX WINT_MIN INT8_C INT16_C "
    "INT32_C INT64_C UINT8_C UINT16_C UINT32_C UINT64_C INTMAX_C UINTMAX_C") | {
    "FWG_COMMON_DEFINED", "FWG_STATIC_ASSERT", "FWG_NOINLINE"}
#: File-scope names of <stddef.h>, <stdint.h> and <string.h> (glibc and newlib, GNU
#: extensions included) and of the generated prelude: a frame cannot define them.
C_RESERVED_NAMES = _C_KEYWORDS | C_RESERVED_MACROS | _words(
    "size_t ptrdiff_t wchar_t max_align_t nullptr_t int8_t int16_t int32_t int64_t uint8_t "
    "uint16_t uint32_t uint64_t int_least8_t int_least16_t int_least32_t int_least64_t "
    "uint_least8_t uint_least16_t uint_least32_t uint_least64_t int_fast8_t int_fast16_t "
    "int_fast32_t int_fast64_t uint_fast8_t uint_fast16_t uint_fast32_t uint_fast64_t "
    "intptr_t uintptr_t intmax_t uintmax_t locale_t memchr memcmp memcpy memmove memset "
    "memccpy mempcpy memmem memrchr rawmemchr memset_explicit memalignment strcat strchr "
    "strcmp strcoll strcpy strcspn strerror strlen strncat strncmp strncpy strpbrk strrchr "
    "strspn strstr strtok strxfrm strdup strndup strnlen stpcpy stpncpy strsep strsignal "
    "strtok_r strerror_r strerror_l strcoll_l strxfrm_l strcasecmp strncasecmp strcasecmp_l "
    "strncasecmp_l strcasestr strchrnul strverscmp strfry memfrob basename strlcpy strlcat "
    "bcmp bcopy bzero explicit_bzero ffs ffsl ffsll index rindex sigabbrev_np sigdescr_np "
    "strerrordesc_np strerrorname_np fwg_static_assert_fwg_ieee754_sizes fwg_f32_of "
    "fwg_f64_of fwg_bits_f32 fwg_bits_f64 fwg_s8 fwg_s16 fwg_s32 fwg_s64 "
    "fwg_pos_before")
#: Member names a struct of the generated C uses besides the fields.
_RX_MEMBERS = ("len", "need", "covered", "gap", "stats", "buf")
_FIXED_STATS = ("frames", "bytes", "checksum_errors", "trailer_errors", "discarded", "resyncs",
                "nonfinite", "overlapping")
_VAR_STATS = ("frames", "bytes", "discarded", "resyncs", "length_errors", "trailer_errors",
              "checksum_errors", "truncated")
#: The words of the DBC grammar (section keywords, attribute types and objects, the names
#: tools give the missing node and message), upper-cased: a DBC name is compared with them
#: case-folded, as DBC names are with each other. A signal named ``SG_`` or a node ``BO_``
#: makes a file no reader parses.
DBC_KEYWORDS = _words(
    "VERSION NS_ NS_DESC_ CM_ BA_DEF_ BA_ VAL_ CAT_DEF_ CAT_ FILTER BA_DEF_DEF_ EV_DATA_ "
    "ENVVAR_DATA_ SGTYPE_ SGTYPE_VAL_ BA_DEF_SGTYPE_ BA_SGTYPE_ SIG_TYPE_REF_ VAL_TABLE_ "
    "SIG_GROUP_ SIG_VALTYPE_ SIGTYPE_VALTYPE_ BO_TX_BU_ BA_DEF_REL_ BA_REL_ BA_DEF_DEF_REL_ "
    "BU_SG_REL_ BU_EV_REL_ BU_BO_REL_ SG_MUL_VAL_ BS_ BU_ BO_ SG_ EV_ VECTOR__XXX "
    "VECTOR__INDEPENDENT_SIG_MSG INT HEX FLOAT STRING ENUM")
#: ProtoField and expert abbreviations the dissector registers for itself.
_LUA_RESERVED = frozenset({"fwbridge.unknown"})

Where = tuple[str, "int | None", "str | None"]  # table, index, key: what _Checker.fail takes


class GenName(NamedTuple):
    """One identifier a generator emits: its target and scope, what makes it, and where."""

    space: str  # "c", "c.member:<struct>", "lua", "dbc.message", "dbc.signal:<message>"
    name: str
    why: str  # "field 'max' label 'size'", for the error line
    where: Where


class NameClash(NamedTuple):
    """A name taken twice (``first`` is the earlier taker) or reserved (``first`` None)."""

    name: GenName
    first: GenName | None
    desc: FrameDescription
    first_desc: FrameDescription | None

    def reason(self) -> str:
        n = self.name
        what = {"c": "the C name", "lua": "the Wireshark field", "dbc.message":
                "the DBC message"}.get(n.space.split(":")[0], "the C member" if n.space.startswith(
                    "c.") else "the DBC signal")
        if self.first is None and n.space.startswith("dbc"):
            return (f"{n.why} makes {what} {n.name}, which is a word of the DBC grammar "
                    f"({n.name.upper()}); choose another name")
        if self.first is None:
            return (f"{n.why} makes {what} {n.name}, which the C compiler or its headers "
                    "already define; choose another name")
        other = self.first.why
        if self.first_desc is not None and self.first_desc is not self.desc:
            other = f"{other} of {self.first_desc.source} (frame {self.first_desc.name!r})"
        return f"{n.why} makes {what} {n.name}, as {other} does; choose another name"


def label(where: Where) -> str:
    """``field[2].name``: the key of a description a name comes from, as errors name it."""
    table, index, key = where
    name = table if index is None else f"{table}[{index + 1}]"
    return f"{name}.{key}" if key else name


def _frame(d: FrameDescription) -> tuple[str, Where]:
    return f"frame {d.name!r}", ("frame", None, "name")


def _c_names(d: FrameDescription, prefix: str) -> Iterator[GenName]:
    p = f"{prefix}{d.name}"
    u = p.upper()
    fwhy, fwhere = _frame(d)
    var = d.length is not None

    def name(n: str, why: str = fwhy, where: Where = fwhere, space: str = "c") -> GenName:
        return GenName(space, n, why, where)

    sizes = ("MIN_SIZE", "MAX_SIZE", "MAX_DATA") if var else ("SIZE", "MAX_SIZE")
    for s in sizes:
        yield name(f"{u}_{s}")
    for i, f in enumerate(d.fields):
        fw: Where = ("field", i, "name")
        if f.scaled:
            yield name(f"{u}_{f.name.upper()}_SCALE", f"field {f.name!r} (scaled)", fw)
            yield name(f"{u}_{f.name.upper()}_OFFSET", f"field {f.name!r} (scaled)", fw)
        key = "flags" if f.flags else "enum"
        for _v, label in (*f.enum, *f.flags):
            yield name(f"{u}_{f.name.upper()}_{label.upper()}",
                       f"field {f.name!r} label {label!r}", ("field", i, key))
    for suffix in ("wire", "t", "encode", "decode", "check"):
        yield name(f"{p}_{suffix}")
    yield name(f"fwg_static_assert_{p}_wire_size")
    wire = f"c.member:{p}_wire"
    if d.header:
        yield name("header", space=wire)
    for i, f in enumerate(d.fields):
        if f.width is None:
            break
        fw = ("field", i, "name")
        yield name(f"fwg_static_assert_{p}_{f.name}_offset", f"field {f.name!r}", fw)
        yield name(f.name, f"field {f.name!r}", fw, wire)
    if not var:
        if d.checksum is not None:
            yield name(d.checksum.name, "the checksum's name", ("checksum", None, "name"), wire)
        if d.trailer:
            yield name("trailer", space=wire)
    value = f"c.member:{p}_t"
    for i, f in enumerate(d.fields):
        if d.length is not None and f.name == d.length.field:
            continue
        fw = ("field", i, "name")
        yield name(f.name, f"field {f.name!r}", fw, value)
        if f.type == "bytes" and f.size is None:
            yield name(f"{f.name}_len", f"field {f.name!r} (its length)", fw, value)
    if d.header:
        yield name(f"{p}_hdr")
    if d.trailer:
        yield name(f"{p}_trl")
    if d.checksum is not None:
        yield name(f"{p}_ck", "the checksum", ("checksum", None, None))
        yield name(f"{p}_put_ck", "the checksum", ("checksum", None, None))
    if d.header:
        yield name(f"{u}_NSTATS")
        for suffix in ("stats", "frame_fn", "rx", "rx_init", "rx_feed", "rx_finish", "rx_push",
                       "rx_byte", "drop", "next", "judge", "process", "feed"):
            yield name(f"{p}_{suffix}")


def _lua_names(d: FrameDescription) -> Iterator[GenName]:
    if not d.header:
        return
    n = d.name
    fwhy, fwhere = _frame(d)
    yield GenName("lua", f"fwbridge.{n}", fwhy, fwhere)
    for i, f in enumerate(d.fields):
        fw: Where = ("field", i, "name")
        why = f"field {f.name!r}"
        yield GenName("lua", f"fwbridge.{n}.{f.name}", why, fw)
        if f.scaled:
            yield GenName("lua", f"fwbridge.{n}.{f.name}.raw", why, fw)
        for _bit, label in f.flags:
            yield GenName("lua", f"fwbridge.{n}.{f.name}.{label.lower()}",
                          f"field {f.name!r} flag {label!r}", ("field", i, "flags"))
    ck = d.checksum
    if ck is not None:
        cw: Where = ("checksum", None, "name")
        for suffix in ("", ".status", ".bad"):
            yield GenName("lua", f"fwbridge.{n}.{ck.name}{suffix}", "the checksum's name", cw)


def _dbc_names(d: FrameDescription) -> Iterator[GenName]:
    if not d.can:
        return
    replaced = {r for s in d.can_signals for r in s.replaces}
    signals: list[tuple[str, str, Where]] = []
    for i, s in enumerate(d.can_signals):
        signals.append((s.name, f"CAN signal {s.name!r}", ("can.signal", i, "name")))
    for i, f in enumerate(d.fields):
        if f.name in replaced:
            continue
        if f.flags:
            signals += [(f"{f.name}_{label.lower()}", f"field {f.name!r} flag {label!r}",
                         ("field", i, "flags")) for _bit, label in f.flags]
        else:
            signals.append((f.name, f"field {f.name!r}", ("field", i, "name")))
    for i, m in enumerate(d.can):
        mw: Where = ("can.message", i, "name")
        for _ident, node in m.ids():
            msg = m.name if node is None else f"{m.name}_{node}"
            why = f"CAN message {m.name!r}" + (f" node {node}" if node is not None else "")
            yield GenName("dbc.message", msg, why, mw)
            for sname, swhy, sw in signals:
                yield GenName(f"dbc.signal:{msg}", sname, swhy, sw)


def generated_names(d: FrameDescription, prefix: str = "",
                    targets: Iterable[str] = ("c", "lua", "dbc")) -> Iterator[GenName]:
    """Every identifier ``targets``' generators emit for ``d`` (C with ``prefix``)."""
    for t in targets:
        yield from {"c": lambda: _c_names(d, prefix), "lua": lambda: _lua_names(d),
                    "dbc": lambda: _dbc_names(d)}[t]()


def _reserved(n: GenName) -> bool:
    if n.space == "c":
        return n.name in C_RESERVED_NAMES
    if n.space.startswith("c.member:"):
        return n.name in C_RESERVED_MACROS or n.name in _C_KEYWORDS
    if n.space.startswith("dbc"):
        return n.name.upper() in DBC_KEYWORDS
    return n.space == "lua" and n.name in _LUA_RESERVED


def clash_error(descs: Sequence[FrameDescription], prefix: str = "",
                targets: Iterable[str] = ("c", "lua", "dbc"),
                extra: Iterable[GenName] = ()) -> str | None:
    """The error line of :func:`first_clash` across descriptions (``FILE: KEY: reason``)."""
    clash = first_clash(descs, prefix, targets, extra)
    if clash is None:
        return None
    return f"{clash.desc.source}: {label(clash.name.where)}: {clash.reason()}"


def first_clash(descs: Sequence[FrameDescription], prefix: str = "",
                targets: Iterable[str] = ("c", "lua", "dbc"),
                extra: Iterable[GenName] = ()) -> NameClash | None:
    """The first generated name of ``descs`` reserved or taken twice, or None.

    DBC names are compared case-folded (CAN tools differ on case); C and Lua
    names exactly, as their compilers do. ``extra`` are names taken first
    (the include guard of ``gen c``).
    """
    seen: dict[tuple[str, str], tuple[GenName, FrameDescription | None]] = {}
    for n in extra:
        seen[(n.space, n.name)] = (n, None)
    targets = tuple(targets)
    for d in descs:
        for n in generated_names(d, prefix, targets):
            if _reserved(n):
                return NameClash(n, None, d, None)
            key = (n.space.lower(), n.name.lower()) if n.space.startswith("dbc") else (
                n.space, n.name)
            if key in seen:
                first, first_desc = seen[key]
                if first == n and first_desc is d:
                    continue  # one part making one name in two places (a struct and a macro)
                return NameClash(n, first, d, first_desc)
            seen[key] = (n, d)
    return None
