"""stats' compiled pass over a chunk (native/chunkstats.py) against sums and key pieces worked out
in plain Python from the records as they were built, and its word-at-a-time key hash against
itself at every position and length (the compiled path and the per-record path must agree)."""

from __future__ import annotations

import random

import numpy as np
import pytest
from helpers.crafted import bad_utf8, record

from mqtool.native import chunkstats, fastscan

HOUR = 3_600_000


def scanned(cases):
    """A fastscan chunk over a buffer holding a record for each dict of fields."""
    data = b""
    for fields in cases:
        data += record(len(data), **fields)
    buf = np.frombuffer(data, dtype=np.uint8)       # read-only, as a file mapping is
    chunk = fastscan.scan(buf, 0, len(buf), 0, True, len(cases) + 1)
    assert chunk.count == len(cases)
    return chunk


def raw(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


def key_pieces(properties: str) -> list[str]:
    """The KEYS pieces of a properties string by the broker's rules, written out plainly: pairs
    split on 0x02, name and value on the first 0x01, empty names or values skipped, the last
    KEYS wins; its value split on spaces, empty pieces dropped, each decoded with "replace"."""
    value = None
    for pair in raw(properties).split(b"\x02"):
        name, _, val = pair.partition(b"\x01")
        if name == b"KEYS" and val:
            value = val
    return [p.decode("utf-8", "replace") for p in (value or b"").split(b" ") if p]


def bucket_exponent(size: int) -> int:
    e = 0
    while 2 ** e < size:
        e += 1
    return e


KEY_CASES = [
    "KEYS\x01a",
    "KEYS\x01" + "x" * 7,
    "KEYS\x01" + "x" * 8,
    "KEYS\x01" + "y" * 9,
    "KEYS\x01" + "z" * 16 + " " + "w" * 17,
    "KEYS\x01" + "long-key-" * 130,                       # a key of more than a thousand bytes
    "KEYS\x01k1 k2  k3 \x02TAGS\x01t",                    # empty pieces between spaces
    "TAGS\x01t\x02KEYS\x01first\x02A\x01b\x02KEYS\x01last one",   # the last KEYS wins
    "KEYS\x01\x02TAGS\x01t",                              # an empty value: no keys
    "KEYS\x01 ",                                          # only a space: no pieces
    "KEYSX\x01no\x02KEY\x01no\x02keys\x01no",             # other names
    "KEYS\x01\u00e9t\u00e9 \u4e2d\u6587 \U0001F600",      # non-ASCII
    bad_utf8(b"KEYS\x01\xff\xfe k\xc3 \xe2\x82x \xf0\x90\x80"),   # malformed UTF-8 decoded with U+FFFD
    bad_utf8(b"KEYS\x01\xc3\xa9\xff"),
    "",
    "KEYS",
    "KEYS\x01",
]


def test_key_hashes_equal_hash_text_of_the_pieces():
    cases = [{"properties": p, "queueId": i} for i, p in enumerate(KEY_CASES)]
    chunk = scanned(cases)
    out = chunkstats.stats_of(chunk, np.ones(chunk.count, dtype=np.bool_), HOUR)
    group_q, key_off, key_hash = out[1], out[-2], out[-1]
    assert group_q.tolist() == list(range(len(cases)))
    for k, case in enumerate(cases):
        want = [chunkstats.hash_text(p) for p in key_pieces(case["properties"])]
        assert key_hash[key_off[k]:key_off[k + 1]].tolist() == want, case
    assert sum(len(key_pieces(c["properties"])) for c in cases) == len(key_hash) > 10


def test_groups_sums_hours_and_the_good_mask():
    """Many queues (the group table's probing), store times going back and forth over hours,
    records left out by the mask, sizes on both sides of powers of two."""
    rng = random.Random(11)
    cases = []
    for i in range(3000):
        cases.append({"topic": rng.choice(["A", "B", "T\u00e9"]), "queueId": rng.randrange(400),
                      "storeTimestamp": 1_700_000_000_000 + rng.randrange(6) * HOUR + rng.randrange(HOUR),
                      "body": b"b" * rng.choice([0, 1, 5, 900, 925, 926, 927, 1950, 1951, 4000]),
                      "properties": f"KEYS\x01k{rng.randrange(500)} s{i % 7}" if i % 5 else "TAGS\x01t"})
    chunk = scanned(cases)
    good = np.array([rng.random() < 0.9 for _ in cases])
    (th, q, row, messages, total, first, last, hist, hour_g, hour_h, hour_n, hour_b, key_off,
     key_hash) = chunkstats.stats_of(chunk, good, HOUR)
    sizes = chunk.columns["size"].tolist()
    want: dict = {}
    for i, case in enumerate(cases):
        if not good[i]:
            continue
        g = want.setdefault((case["topic"], case["queueId"]),
                            {"first_row": i, "messages": 0, "bytes": 0, "times": [], "hist": {}, "hours": {}, "hourBytes": {},
                             "keys": []})
        g["messages"] += 1
        g["bytes"] += sizes[i]
        g["times"].append(case["storeTimestamp"])
        e = bucket_exponent(sizes[i])
        g["hist"][e] = g["hist"].get(e, 0) + 1
        hour = case["storeTimestamp"] // HOUR
        g["hours"][hour] = g["hours"].get(hour, 0) + 1
        g["hourBytes"][hour] = g["hourBytes"].get(hour, 0) + sizes[i]
        g["keys"].extend(chunkstats.hash_text(p) for p in key_pieces(case["properties"]))
    assert len(q) == len(want) > 300
    got_hours: dict = {}
    got_bytes: dict = {}
    for k, hour, n, b in zip(hour_g.tolist(), hour_h.tolist(), hour_n.tolist(), hour_b.tolist()):
        assert (k, hour) not in got_hours
        got_hours[(k, hour)], got_bytes[(k, hour)] = n, b
    for k in range(len(q)):
        w = want[(chunk.topic(int(row[k])), int(q[k]))]
        assert (int(row[k]), messages[k], total[k], first[k], last[k]) == (
            w["first_row"], w["messages"], w["bytes"], min(w["times"]), max(w["times"]))
        assert {e: int(n) for e, n in enumerate(hist[k]) if n} == w["hist"]
        assert {h: n for (g, h), n in got_hours.items() if g == k} == w["hours"]
        assert {h: b for (g, h), b in got_bytes.items() if g == k} == w["hourBytes"]
        assert key_hash[key_off[k]:key_off[k + 1]].tolist() == w["keys"]
    assert th.tolist() == [int(chunk.columns["topic_hash"][i]) for i in row]


def test_nothing_good():
    chunk = scanned([{"properties": "KEYS\x01a"}] * 3)
    out = chunkstats.stats_of(chunk, np.zeros(3, dtype=np.bool_), HOUR)
    assert [len(a) for a in out] == [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0]


def test_hash_is_the_same_at_every_position_and_alignment():
    """The hash reads 8 bytes at a time where they lie inside the array, byte by byte near its
    end: a key gives the same hash wherever it lies, and hash_text's."""
    rng = random.Random(3)
    for length in list(range(0, 40)) + [63, 64, 65, 1000]:
        text = "".join(rng.choice("ab\u00e9\u4e2d0 ") for _ in range(length))
        key = text.encode("utf-8")
        want = chunkstats.hash_text(text)
        for before in range(0, 10):
            for after in (0, 1, 7, 8, 20):
                data = np.frombuffer(bytes(rng.randrange(256) for _ in range(before)) + key
                                     + bytes(rng.randrange(256) for _ in range(after)), dtype=np.uint8)
                assert int(chunkstats.hash_bytes(data, before, before + len(key))) == want, (text, before, after)


def test_hash_keeps_keys_apart():
    """A good 64-bit hash: no two of these keys share one (with a million distinct keys the odds
    of any collision are about 3e-8).  Keys that differ in one byte, by trailing NULs (length),
    by a byte across a word's edge, and counters like the ones stores hold."""
    keys = [f"order-{i:012d}" for i in range(400_000)]
    keys += [f"k{i}" for i in range(300_000)]
    keys += [str(i) for i in range(200_000)]
    keys += ["a" * n for n in range(200)] + ["\x00" * n for n in range(200)] + ["a" + "\x00" * n for n in range(50)]
    keys += [("x" * 7 + chr(32 + i % 90) + "y" * 8 + chr(32 + i // 90)) for i in range(8100)]
    hashes = {chunkstats.hash_text(k) for k in keys}
    assert len(hashes) == len(set(keys))


@pytest.mark.parametrize("size", list(range(0, 70)) + [127, 128, 129, 1023, 1024, 1025, 2**31 - 1, 2**31, 2**31 + 1])
def test_size_exponent(size):
    assert chunkstats._exponent(size) == bucket_exponent(size)


def test_distinct_keys_count_whatever_way_an_aggregate_was_built():
    """Raw hashes of a chunk, settled partials and sums of both count each key once."""
    import numpy as np

    from mqtool.pipeline.storestats import QueueAgg

    raw = QueueAgg(keys=[np.array([5, 3, 5, 9, 3], dtype=np.uint64)])
    assert raw.distinct_keys() == 3
    other = QueueAgg(keys=[np.array([9, 1], dtype=np.uint64), np.array([1, 7], dtype=np.uint64)])
    total = QueueAgg()
    total.add(raw)                   # settled, alone: kept as it is
    assert total.distinct_keys() == 3
    total.add(other)                 # then unsettled hashes join it
    assert total.distinct_keys() == len({5, 3, 9, 1, 7})
    assert QueueAgg().distinct_keys() == 0
