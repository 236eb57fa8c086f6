"""`mqtool append --json`'s put lines for a compiled batch, rendered by compiled code.

At a broker's rate a dict and a json.dumps per put would cost more than the put.  The
lines are byte for byte what PutResult.to_json gives through the json module
(tests/test_specblock.py compares them):
{"type":"put","line":N,"status":"PUT_OK","msgId":"…","wroteOffset":…,"wroteBytes":…,
"queueOffset":…,"storeTimestamp":…,"topic":"…","queueId":…}
"""

from __future__ import annotations

import numpy as np

from mqtool.native import aot
from mqtool.native.jit import njit
from mqtool.native.jsonlines import put_int64

# the constant parts between the values, in order
PARTS = ('{"type":"put","line":', ',"status":"PUT_OK","msgId":"', '","wroteOffset":', ',"wroteBytes":',
         ',"queueOffset":', ',"storeTimestamp":', ',"topic":', ',"queueId":', '}\n')
_HEX = np.frombuffer(b"0123456789ABCDEF", dtype=np.uint8)


def parts() -> tuple[np.ndarray, np.ndarray]:
    data = "".join(PARTS).encode("ascii")
    lengths = np.array([len(p) for p in PARTS], dtype=np.int64)
    return np.frombuffer(data, dtype=np.uint8), np.concatenate(([0], np.cumsum(lengths)))


@njit(cache=True, inline="always")
def _put(src, lo, hi, out, q):
    out[q:q + hi - lo] = src[lo:hi]
    return q + hi - lo


@njit(cache=True, nogil=True)
def render_puts(numbers, store_id, prefixes, prefix_off, wrote, lengths, queue_offsets, store_ts, topic_id,
                topics, topic_off, queue_ids, parts, part_off, out):
    """The lines of a batch into out (room enough); returns their length.  prefixes: each store
    host's msgId text before the offset; topics: each topic as JSON text."""
    q = 0
    hexdigits = _HEX
    for i in range(numbers.shape[0]):
        q = _put(parts, part_off[0], part_off[1], out, q)
        q = put_int64(numbers[i], out, q)
        q = _put(parts, part_off[1], part_off[2], out, q)
        h = store_id[i]
        q = _put(prefixes, prefix_off[h], prefix_off[h + 1], out, q)
        w = wrote[i]
        for k in range(16):
            out[q + k] = hexdigits[(w >> (60 - 4 * k)) & 15]
        q += 16
        q = _put(parts, part_off[2], part_off[3], out, q)
        q = put_int64(w, out, q)
        q = _put(parts, part_off[3], part_off[4], out, q)
        q = put_int64(lengths[i], out, q)
        q = _put(parts, part_off[4], part_off[5], out, q)
        q = put_int64(queue_offsets[i], out, q)
        q = _put(parts, part_off[5], part_off[6], out, q)
        q = put_int64(store_ts[i], out, q)
        q = _put(parts, part_off[6], part_off[7], out, q)
        t = topic_id[i]
        q = _put(topics, topic_off[t], topic_off[t + 1], out, q)
        q = _put(parts, part_off[7], part_off[8], out, q)
        q = put_int64(queue_ids[i], out, q)
        q = _put(parts, part_off[8], part_off[9], out, q)
    return q


aot.adopt(globals(), "putlines")   # the kernels built ahead of time, where they are (native/aot.py)
