"""JavaHashMap against iteration orders printed by a real OpenJDK 17 java.util.HashMap."""

from __future__ import annotations

import random
import shutil
import subprocess

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mqtool.engine.javamap import JavaHashMap, properties_to_string, spread, string_to_properties, table_size_for


def family(n):
    """Strings that all share one String.hashCode (concatenations of "Aa" and "BB")."""
    out = ["Aa", "BB"]
    while len(out) < n:
        out = [x + y for x in out for y in ("Aa", "BB")]
    return out[:n]


def replay(capacity, ops):
    m = JavaHashMap(capacity)
    for i, (op, key) in enumerate(ops):
        if op == "P":
            m.put(key, f"v{i}")
        else:
            m.remove(key)
    return m


def puts(keys):
    return [("P", k) for k in keys]


# (initial capacity, operations, keySet() order printed by OpenJDK 17)
GOLDEN = {
    "basic": (None, puts(["TAGS", "KEYS", "UNIQ_KEY", "CLUSTER"]), ["KEYS", "UNIQ_KEY", "CLUSTER", "TAGS"]),
    "basic_cap128": (128, puts(["TAGS", "KEYS", "UNIQ_KEY", "CLUSTER"]), ["UNIQ_KEY", "CLUSTER", "TAGS", "KEYS"]),
    "wait_reput": (
        None,
        puts(["TAGS", "KEYS", "WAIT", "DELAY", "CLUSTER"]) + [("R", "WAIT")] + puts(["WAIT", "REAL_TOPIC", "REAL_QID"]),
        ["REAL_TOPIC", "KEYS", "CLUSTER", "DELAY", "WAIT", "TAGS", "REAL_QID"],
    ),
    "replace_keeps_position": (None, puts(["Aa", "BB", "AaAa", "Aa"]), ["Aa", "BB", "AaAa"]),
    "grow_k40": (
        None,
        puts([f"k{i}" for i in range(40)]),
        ["k31", "k30", "k11", "k33", "k10", "k32", "k13", "k35", "k12", "k34", "k15", "k37", "k14", "k36",
         "k17", "k39", "k16", "k38", "k19", "k18", "k0", "k1", "k2", "k3", "k20", "k4", "k5", "k22", "k6",
         "k21", "k7", "k24", "k8", "k23", "k9", "k26", "k25", "k28", "k27", "k29"],
    ),
    "grow_remove": (
        None,
        puts([f"k{i}" for i in range(30)]) + [("R", f"k{i}") for i in range(0, 30, 3)]
        + puts([f"k{i}" for i in range(0, 30, 6)]),
        ["k11", "k10", "k13", "k12", "k14", "k17", "k16", "k19", "k18", "k0", "k1", "k2", "k20", "k4", "k5",
         "k22", "k6", "k7", "k24", "k8", "k23", "k26", "k25", "k28", "k29"],
    ),
    "unicode": (
        None,
        puts(["TAGS", "KEYS", "UNIQ_KEY", "都市", "備考", "πόλη", "σημείωση", "مدينة", "ملاحظة", "𝒳-name", "CLUSTER"]),
        ["備考", "مدينة", "都市", "KEYS", "ملاحظة", "σημείωση", "𝒳-name", "πόλη", "UNIQ_KEY", "CLUSTER", "TAGS"],
    ),
    "collide9": (None, puts(family(9)), family(9)),
    "collide10": (None, puts(family(10)), family(10)),
    "cap1": (1, puts([f"k{i}" for i in range(7)]), [f"k{i}" for i in range(7)]),
}


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_golden_orders(name):
    capacity, ops, expected = GOLDEN[name]
    m = replay(capacity, ops)
    assert m.keys() == expected
    assert m.exact


def test_spread_and_table_size():
    assert spread("TAGS") == 2567193 ^ (2567193 >> 16)  # "TAGS".hashCode() == 2567193
    assert spread("Aa") == spread("BB")
    assert [table_size_for(c) for c in (0, 1, 3, 16, 17, 100, 128)] == [1, 1, 4, 16, 32, 128, 128]


def test_put_existing_keeps_value_slot_and_returns_old():
    m = JavaHashMap()
    assert m.put("DELAY", "250") is None
    assert m.put("DELAY", "18") == "250"
    assert m.items() == [("DELAY", "18")]
    assert len(m) == 1 and "DELAY" in m and m["DELAY"] == "18"
    assert m.remove("DELAY") == "18" and m.remove("DELAY") is None and len(m) == 0


def test_long_chain_resizes_small_table_then_gives_up_exactness():
    """treeifyBin resizes a table under 64 instead of treeifying; at 64 a tree would form."""
    same_hash = family(16)
    m = JavaHashMap(items=[(k, "v") for k in same_hash[:8]])
    assert m.capacity == 16
    m.put(same_hash[8], "v")
    assert m.capacity == 32 and m.exact
    m.put(same_hash[9], "v")
    assert m.capacity == 64 and m.exact
    m.put(same_hash[10], "v")
    assert m.capacity == 64 and not m.exact  # a red-black tree bin: order not modelled


def test_properties_string_round_trip():
    m = string_to_properties("TAGS\x01a\x02KEYS\x01k1 k2\x02UNIQ_KEY\x01U")
    assert properties_to_string(m) == "KEYS\x01k1 k2\x02UNIQ_KEY\x01U\x02TAGS\x01a"
    assert properties_to_string(m, trailing_separator=True).endswith("TAGS\x01a\x02")
    assert properties_to_string(JavaHashMap()) == ""
    assert properties_to_string(JavaHashMap(), trailing_separator=True) == ""
    # pairs with an empty name or value are skipped, a later duplicate wins in place
    m = string_to_properties("\x01x\x02a\x01\x02b\x011\x02b\x012")
    assert m.items() == [("b", "2")]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.text(min_size=1, max_size=6)), max_size=120))
def test_order_is_bucket_then_insertion(ops):
    """Invariant of a non-tree HashMap: bucket index, then time of the (last) insertion."""
    m = JavaHashMap()
    stamp = {}
    for i, (remove, key) in enumerate(ops):
        if remove:
            m.remove(key)
            stamp.pop(key, None)
        else:
            m.put(key, "v")
            stamp.setdefault(key, i)
    if not m.exact:
        return
    expected = sorted(stamp, key=lambda k: (spread(k) & (m.capacity - 1), stamp[k]))
    assert m.keys() == expected


JAVA_PROGRAM = r"""
import java.io.*;
import java.nio.charset.StandardCharsets;
import java.util.*;
public class HM {
  public static void main(String[] a) throws Exception {
    BufferedReader r = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
    PrintStream out = new PrintStream(System.out, true, "UTF-8");
    HashMap<String,String> m = null; String line;
    while ((line = r.readLine()) != null) {
      String[] p = line.split("\u0001", -1);
      switch (p[0]) {
        case "N": int c = Integer.parseInt(p[1]); m = c < 0 ? new HashMap<>() : new HashMap<>(c); break;
        case "P": m.put(p[1], p[2]); break;
        case "R": m.remove(p[1]); break;
        case "E": out.println("[" + String.join("\u0002", m.keySet())); break;
      }
    }
  }
}
"""


@pytest.mark.skipif(not (shutil.which("javac") and shutil.which("java")), reason="no JDK")
def test_random_operations_against_real_java(tmp_path):
    """Random put/remove sequences on a real java.util.HashMap (when a JDK is installed)."""
    (tmp_path / "HM.java").write_text(JAVA_PROGRAM)
    subprocess.run(["javac", "HM.java"], cwd=tmp_path, check=True)
    rng = random.Random(20261122)
    pool = (
        family(16) + [f"k{i}" for i in range(200)] + [f"ω{i}" for i in range(50)] + [f"𓀀x{i}" for i in range(30)]
        + ["TAGS", "KEYS", "UNIQ_KEY", "CLUSTER", "WAIT", "DELAY", "REAL_TOPIC", "REAL_QID", "TRAN_MSG", "PGROUP"]
    )
    lines, models = [], []
    for _ in range(300):
        cap = rng.choice([-1, -1, -1, 128, 1, 3, 100])
        lines.append(f"N\x01{cap}")
        m = JavaHashMap(None if cap < 0 else cap)
        keys = rng.sample(pool, rng.randint(1, 150))
        for i in range(rng.randint(0, 300)):
            key = rng.choice(keys)
            if rng.random() < 0.2:
                lines.append(f"R\x01{key}")
                m.remove(key)
            else:
                lines.append(f"P\x01{key}\x01{i}")
                m.put(key, str(i))
        lines.append("E")
        models.append(m)
    res = subprocess.run(
        ["java", "-cp", str(tmp_path), "HM"], input="\n".join(lines) + "\n",
        capture_output=True, text=True, encoding="utf-8", check=True,
    )
    outputs = res.stdout.splitlines()
    assert len(outputs) == len(models)
    checked = 0
    for m, line in zip(models, outputs):
        java_keys = line[1:].split("\x02") if len(line) > 1 else []
        if m.exact:
            assert m.keys() == java_keys
            checked += 1
    assert checked > 200
