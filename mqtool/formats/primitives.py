"""The byte rules compiled kernels share, in one place: numba functions over a uint8 array.

Every kernel of mqtool/native/ and forensics/verify/kernels.py reads and writes the store's
bytes through these: the big-endian integers of every layout, the Java String.hashCode of
UTF-8 text (tags codes and index keys), the index's key hash, the property pairs of a
record (MessageDecoder.string2messageProperties' split) and the DELAY level's fast form.
The Python forms of the same rules are javastr.py and properties.py; tests/test_fastscan.py,
test_columnar.py and test_chunkstats.py check the kernels built on these against them.

They are written here as plain functions and named in INLINE (and the two word-level ones, which
numba lowers to single machine instructions, in INTRINSICS): importing this module imports
numpy, not numba.  native/jit.load(), the one place numba is imported, makes them numba
functions, inline="always" (compiled into each kernel that calls them, so they cost no call;
not cached on their own: the kernels that inline them are), when something has to be compiled.
Where the kernels were built ahead of time (native/aot.py) that never happens.
"""

from __future__ import annotations

import numpy as np

from mqtool.formats.properties import KEY_SEPARATOR, NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR

U = np.uint64
ONES = U(0x0101010101010101)
HIGHS = U(0x8080808080808080)
INT_MAX = 0x7FFFFFFF

_SEP = ord(PROPERTY_SEPARATOR)          # 0x02: ends a pair
_NAME_END = ord(NAME_VALUE_SEPARATOR)   # 0x01: ends a pair's name
_KEY_END = ord(KEY_SEPARATOR)           # ' ': ends one of the index keys a KEYS value holds


# -- big-endian integers ---------------------------------------------------------------------

def u32(buf, p):
    """The big-endian unsigned 32-bit integer at buf[p]."""
    return (np.int64(buf[p]) << 24) | (np.int64(buf[p + 1]) << 16) | (np.int64(buf[p + 2]) << 8) | np.int64(buf[p + 3])


def i32(buf, p):
    """The big-endian signed 32-bit integer at buf[p] (Java's int)."""
    v = u32(buf, p)
    return v - 0x100000000 if v >= 0x80000000 else v


def i64(buf, p):
    """The big-endian 64-bit integer at buf[p] (Java's long)."""
    return (u32(buf, p) << 32) | u32(buf, p + 4)


def put32(out, p, v):
    """v's low 32 bits, big-endian, at out[p]."""
    out[p] = (v >> 24) & 0xFF
    out[p + 1] = (v >> 16) & 0xFF
    out[p + 2] = (v >> 8) & 0xFF
    out[p + 3] = v & 0xFF


def put64(out, p, v):
    """v, big-endian, at out[p]."""
    put32(out, p, (v >> 32) & 0xFFFFFFFF)
    put32(out, p + 4, v & 0xFFFFFFFF)


def signed32(h):
    """An unsigned 32-bit value as Java's int."""
    return h - 0x100000000 if h >= 0x80000000 else h


# -- words of bytes --------------------------------------------------------------------------

def load_u64(typingctx, address):
    """(an intrinsic) load_u64(address): the 8 bytes at address (an integer, any alignment) as a
    uint64 in the machine's order (little-endian on the x86-64, AArch64 and ppc64le machines
    numba runs on), in one load: lets a kernel look at a word of a buffer at a time."""
    from llvmlite import ir
    from numba.core import types

    def codegen(context, builder, signature, args):
        pointer = builder.inttoptr(args[0], ir.IntType(64).as_pointer())
        return builder.load(pointer, align=1)
    return types.uint64(types.int64), codegen


def data_address(typingctx, array):
    """(an intrinsic) data_address(array): where an array's bytes start, as an int64 (what
    array.ctypes.data gives, without the reference counting numba adds around .ctypes: that
    costs more than the loads it is for, called once per string)."""
    from llvmlite import ir
    from numba.core import types

    def codegen(context, builder, signature, args):
        data = context.make_array(signature.args[0])(context, builder, args[0]).data
        return builder.ptrtoint(data, ir.IntType(64))
    return types.int64(array), codegen


def trailing_zeros(typingctx, word):
    """(an intrinsic) trailing_zeros(word): how many zero bits an integer has below its lowest
    set bit, of its own type (LLVM's cttz, one instruction)."""
    from llvmlite import ir

    def codegen(context, builder, signature, args):
        return builder.cttz(args[0], ir.Constant(ir.IntType(1), 0))
    return word(word), codegen


def word_at(data, p, n):
    """The n (1..8) bytes of data at p as a little-endian uint64, zero above them.  Loaded in
    one go when 8 bytes from p lie inside data (the bytes past n are masked off)."""
    if p + 8 <= len(data):
        w = load_u64(data_address(data) + p)
        if n < 8:
            w &= (U(1) << U(8 * n)) - U(1)
        return w
    w = U(0)
    for k in range(n):
        w |= U(data[U(p + k)]) << U(8 * k)
    return w


def find_byte(buf, p, end, byte):
    """The first position of byte in buf[p:end], or end: 8 bytes at a time (a zero byte of
    word ^ byte * ONES found by the borrow trick, exact for the lowest one)."""
    pattern = U(byte) * ONES
    limit = len(buf) - 8
    while p < end:
        if p <= limit:
            x = load_u64(data_address(buf) + p) ^ pattern
            hits = (x - ONES) & ~x & HIGHS
            if hits:
                return min(p + np.int64(trailing_zeros(hits) >> 3), end)
            p += 8
        else:
            if buf[U(p)] == byte:
                return p
            p += 1
    return end


def is_ascii(buf, lo, hi):
    """Whether buf[lo:hi] is all ASCII (then its UTF-8 text is the bytes as they are)."""
    seen = U(0)
    p = lo
    while p < hi:
        n = min(8, hi - p)
        seen |= word_at(buf, p, n)
        p += n
    return (seen & HIGHS) == 0


# -- property pairs --------------------------------------------------------------------------

def pair_at(buf, p, end):
    """The property pair starting at buf[p] (pairs end at 0x02 or at end): (where its first 0x01
    is, or its end when it has none; its end).  The pair has a name and a value when
    has_value(p, first 0x01, end) holds; the broker skips the others.  The next pair starts
    just past its end."""
    q = find_byte(buf, p, end, _SEP)
    return find_byte(buf, p, q, _NAME_END), q


def key_end(buf, p, end):
    """Where the index key starting at buf[p] of a KEYS value ending at end ends: at the next
    KEY_SEPARATOR, or at end (an empty key, p itself, is skipped by the index)."""
    return find_byte(buf, p, end, _KEY_END)


def has_value(p, s, q):
    """Whether the pair buf[p:q] whose first 0x01 is at s has a name and a value (neither
    empty): MessageDecoder.string2messageProperties keeps only those, a later one of the same
    name in the earlier one's place."""
    return p < s < q - 1


def is_name(buf, p, end, name):
    """Whether buf[p:end] is name (a uint8 array or a tuple of byte codes); up to 8 bytes, as one
    word (the usual names: TAGS, KEYS, UNIQ_KEY, DELAY)."""
    if end - p != len(name):
        return False
    if len(name) <= 8:
        w = U(0)
        for k in range(len(name)):
            w |= U(name[k]) << U(8 * k)
        return word_at(buf, p, len(name)) == w
    for k in range(len(name)):
        if buf[p + k] != name[k]:
            return False
    return True


def delay_level(buf, lo, hi):
    """The DELAY value buf[lo:hi] when it is plain ASCII digits that fit Java's int, else -1:
    the caller then asks javastr.parse_java_integer, Integer.parseInt's rules (a sign, other
    scripts' digits, or no number at all)."""
    if hi - lo > 10:
        return -1
    value = 0
    for k in range(lo, hi):
        c = buf[k]
        if c < 48 or c > 57:
            return -1
        value = value * 10 + (c - 48)
    return value if value <= INT_MAX else -1


# -- Java strings ----------------------------------------------------------------------------

def utf8_continuation(b):
    """Whether the byte b is a UTF-8 continuation byte (10xxxxxx)."""
    return (np.int64(b) & 0xC0) == 0x80


_P2, _P3, _P4, _P5, _P6, _P7, _P8 = (U(pow(31, k, 1 << 32)) for k in range(2, 9))   # 31^k modulo 2^32


def java_hash(buf, p, end, h, state):
    """String.hashCode continued from h (unsigned 32 bits) over the text of the UTF-8 bytes
    buf[p:end], as the UTF-16 code units Java hashes (a character outside the BMP as its two
    surrogates).  Malformed UTF-8 sets state[0] = 1: the caller then hashes that text in
    Python (javastr.java_hash), which decodes it as Java does (replacement characters).
    ASCII goes 8 bytes a step: h * 31^8 plus the bytes times 31^7 .. 31^0, modulo 2^32 (the
    multiplications of one word do not wait on each other, as the byte-at-a-time steps do)."""
    addr = data_address(buf)
    while p < end:
        if end - p >= 8:
            w = load_u64(addr + p)
            if (w & HIGHS) == U(0):
                h = np.int64((U(h) * _P8 + (w & U(0xFF)) * _P7 + ((w >> U(8)) & U(0xFF)) * _P6
                              + ((w >> U(16)) & U(0xFF)) * _P5 + ((w >> U(24)) & U(0xFF)) * _P4
                              + ((w >> U(32)) & U(0xFF)) * _P3 + ((w >> U(40)) & U(0xFF)) * _P2
                              + ((w >> U(48)) & U(0xFF)) * U(31) + (w >> U(56))) & U(0xFFFFFFFF))
                p += 8
                continue
        b = np.int64(buf[p])
        if b < 0x80:
            h = (h * 31 + b) & 0xFFFFFFFF
            p += 1
        elif 0xC2 <= b < 0xE0 and p + 1 < end and utf8_continuation(buf[p + 1]):
            h = (h * 31 + (((b & 0x1F) << 6) | (np.int64(buf[p + 1]) & 0x3F))) & 0xFFFFFFFF
            p += 2
        elif 0xE0 <= b < 0xF0 and p + 2 < end and utf8_continuation(buf[p + 1]) \
                and utf8_continuation(buf[p + 2]) \
                and not (b == 0xE0 and buf[p + 1] < 0xA0) and not (b == 0xED and buf[p + 1] >= 0xA0):
            cp = ((b & 0x0F) << 12) | ((np.int64(buf[p + 1]) & 0x3F) << 6) | (np.int64(buf[p + 2]) & 0x3F)
            h = (h * 31 + cp) & 0xFFFFFFFF
            p += 3
        elif 0xF0 <= b < 0xF5 and p + 3 < end and utf8_continuation(buf[p + 1]) \
                and utf8_continuation(buf[p + 2]) and utf8_continuation(buf[p + 3]) \
                and not (b == 0xF0 and buf[p + 1] < 0x90) and not (b == 0xF4 and buf[p + 1] >= 0x90):
            cp = (((b & 0x07) << 18) | ((np.int64(buf[p + 1]) & 0x3F) << 12)
                  | ((np.int64(buf[p + 2]) & 0x3F) << 6) | (np.int64(buf[p + 3]) & 0x3F)) - 0x10000
            h = (h * 31 + (0xD800 + (cp >> 10))) & 0xFFFFFFFF
            h = (h * 31 + (0xDC00 + (cp & 0x3FF))) & 0xFFFFFFFF
            p += 4
        else:
            state[0] = 1
            p += 1
    return h


def key_prefix(topic_hash):
    """The hash of `topic#` from the topic's (unsigned): an index key is topic#key."""
    return (topic_hash * 31 + 35) & 0xFFFFFFFF


def index_hash(h):
    """IndexFile.indexKeyHashMethod of a key whose String.hashCode is h (unsigned 32 bits):
    abs(hashCode), Integer.MIN_VALUE as 0 (javastr.index_key_hash)."""
    h = signed32(h)
    if h == -0x80000000:
        return 0
    return -h if h < 0 else h


# what native/jit.load() makes numba functions of
INLINE = (u32, i32, i64, put32, put64, signed32, word_at, find_byte, is_ascii, pair_at, key_end, has_value, is_name,
          delay_level, utf8_continuation, java_hash, key_prefix, index_hash)
INTRINSICS = (load_u64, trailing_zeros, data_address)
