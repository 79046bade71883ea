"""LEB128 varints as the engine writes and reads them (include/folio/detail/encoding/varint.hpp: put_varint and
byte_reader::varint), for the batches and version vectors that tests and bench scripts spell byte by byte.

The end-to-end modules import it from their own directory; bench/support scripts put tests/e2e on
sys.path first, as bench/memory.py does for stack.py.
"""


def varint(n):
    """The bytes of `n` (n >= 0): seven bits a byte, lowest first, the high bit set on all but the last."""
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def read_varint(b, i):
    """The value of the (well-formed) varint at b[i] and the offset just past it."""
    x = s = 0
    while True:
        c = b[i]
        i += 1
        x |= (c & 0x7F) << s
        s += 7
        if c < 0x80:
            return x, i
