"""DLedger stores (RocketMQ 5.3.3 DLedgerCommitLog + DLedger 0.3.1.2) read as the broker reads
them, checked, rebuilt, refused by the writers that cannot keep them, and `diff` of replicas.

The dump, consume queue, lookup, verify and recover tests that every fixture goes through run on
the DLedger fixtures too (conftest.DLEDGER); here is what is DLedger's own."""

from __future__ import annotations

import os
import shutil
import struct
from pathlib import Path

import numpy as np
import pytest
from test_info_and_layout import snapshot

from mqtool.formats import dledger as fmt
from mqtool.storage import dledger
from mqtool.storage.mappedfile import MappedFile

from conftest import DLEDGER, expected_read

SIZES = ["--set", "mappedFileSizeCommitLog=65536", "--set", "mappedFileSizeConsumeQueue=6000",
         "--set", "maxHashSlotNum=100", "--set", "maxIndexNum=400"]


def of_type(name, kind):
    return [line for line in expected_read(name) if line["type"] == kind]


def data_dir(store: Path) -> Path:
    (folder,) = [p for p in store.iterdir() if p.name.startswith("dledger-")]
    return folder / "data"


# ------------------------------------------------------------------ formats

@pytest.mark.parametrize("name", ["dledger1", "dledger3-n2"])
def test_schemas_and_fast_decoders_read_the_brokers_bytes_alike(name, extracted):
    store = extracted(name)
    data = data_dir(store)
    for entry in of_type(name, "dledger_entry"):
        raw = (data / entry["file"]).read_bytes()[entry["filePos"]:entry["filePos"] + fmt.HEADER_SIZE]
        parsed = fmt.ENTRY_HEADER.parse(raw)
        fast = fmt.decode_header(raw, 0)
        assert (parsed.magic, parsed.size, parsed.index, parsed.term, parsed.pos, parsed.bodyLength) == \
            (entry["magic"], entry["size"], entry["index"], entry["term"], entry["storedPos"], entry["bodyLength"])
        assert tuple(fast) == tuple(v for k, v in parsed.items() if not k.startswith("_"))
        assert fmt.ENTRY_HEADER.build(parsed) == raw == fmt.encode_header(fast)
    for file_name in sorted({e["file"] for e in of_type(name, "dledger_entry")}):   # the vectorised reader too
        entries = [e for e in of_type(name, "dledger_entry") if e["file"] == file_name]
        positions = np.array([e["filePos"] for e in entries], dtype=np.int64)
        got = dledger.read_fields((data / file_name).read_bytes(), positions, fmt.HEADER_FIELDS)
        assert [list(map(int, row)) for row in zip(*(got[k] for k in ("magic", "size", "index", "term", "pos")))] == \
            [[e["magic"], e["size"], e["index"], e["term"], e["storedPos"]] for e in entries]
    for blank in of_type(name, "dledger_blank"):
        raw = (data / blank["file"]).read_bytes()[blank["pos"] % 65536:][:8]
        assert fmt.BLANK.parse(raw).size == blank["declaredSize"]
    index = data.parent / "index" / "00000000000000000000"
    with open(index, "rb") as fh:
        head = fh.read(fmt.INDEX_UNIT_SIZE * 256)
    units = of_type(name, "dledger_index_unit")
    assert units
    for unit in units:
        raw = head[unit["unitOffset"]:unit["unitOffset"] + fmt.INDEX_UNIT_SIZE]
        parsed = fmt.INDEX_UNIT.parse(raw)
        assert tuple(fmt.decode_index_unit(raw, 0)) == (parsed.magic, parsed.pos, parsed.size, parsed.index, parsed.term)
        assert (parsed.magic, parsed.pos, parsed.size, parsed.index, parsed.term) == \
            (unit["magic"], unit["pos"], unit["size"], unit["index"], unit["term"])
    (pre,) = of_type(name, "dledger_pre")
    for key, file_name in (("checkpoint", "checkpoint"), ("checkpointBak", "checkpoint.bak"),
                           ("currterm", "currterm"), ("currtermBak", "currterm.bak")):
        if pre[key] is None:
            assert not (data.parent / file_name).exists()
            continue
        text = (data.parent / file_name).read_bytes()
        assert text.decode() == pre[key]["text"]
        assert fmt.PROPERTIES.parse(text) == pre[key]["values"]
        assert fmt.PROPERTIES.build(pre[key]["values"]) == text


@pytest.mark.parametrize("name", DLEDGER)
def test_the_entry_walk_finds_the_entries_blanks_and_end_the_broker_found(name, extracted):
    data = data_dir(extracted(name))
    files = sorted(data.iterdir())
    entries, blanks, end = [], [], None
    for i, path in enumerate(files):
        mf = MappedFile(path, 65536, strict=False)
        try:
            for item in dledger.walk_entries(mf, is_last=i == len(files) - 1):
                if isinstance(item, dledger.Entry):
                    h = item.header
                    entries.append((item.offset, h.size, h.index, h.term, item.record_offset))
                elif type(item).__name__ == "Blank":
                    blanks.append((item.offset, item.total_size))
                elif type(item).__name__ == "EndOfData":
                    end = item.offset
                else:
                    pytest.fail(f"unexpected {item}")
        finally:
            mf.close()
    assert entries == [(e["pos"], e["size"], e["index"], e["term"], e["records"][0]["physicalOffset"])
                       for e in of_type(name, "dledger_entry")]
    assert blanks == [(b["pos"], b["declaredSize"]) for b in of_type(name, "dledger_blank")]
    (data_end,) = of_type(name, "dledger_data_end")
    assert end == data_end["endOffset"]


# ------------------------------------------------------------------ readers

@pytest.mark.parametrize("name", DLEDGER)
def test_info_shows_the_ledger_the_broker_loads(name, extracted, run_cli):
    store = extracted(name)
    before = snapshot(store)
    result = run_cli("info", store, "--json")
    assert result.code == 0, result.err
    (info,) = result.json_lines()
    (opened,) = of_type(name, "dledger_open")
    ledger = info["dledger"]
    for field in ("selfId", "currTerm", "ledgerBeginIndex", "ledgerEndIndex", "ledgerEndTerm", "committedIndex",
                  "committedPos"):
        assert ledger[field] == opened[field], field
    assert ledger["voteLeader"] == opened["currVoteFor"]
    assert ledger["uncommittedEntries"] == 0
    (store_line,) = of_type(name, "store")
    assert (info["commitlog"]["minOffset"], info["commitlog"]["maxOffset"]) == \
        (store_line["minPhyOffset"], store_line["maxPhyOffset"])
    queues = {(q["topic"], q["queueId"]): (q["minOffset"], q["maxOffset"]) for q in info["queues"]}
    assert queues == {(q["topic"], q["queueId"]): (q["minOffset"], q["maxOffset"]) for q in of_type(name, "queue")}
    census = {e["path"]: e for e in info["census"]}
    assert census[f"dledger-{opened['selfId']}/"]["status"] == "understood"
    assert snapshot(store) == before


@pytest.mark.parametrize("name", DLEDGER)
def test_dump_dledger_shows_entries_and_index_units(name, extracted, run_cli):
    result = run_cli("dump", extracted(name), "dledger", "--json")
    assert result.code == 0, result.err
    lines = result.json_lines()
    entries = [(l["offset"], l["index"], l["term"], l["size"], l["recordOffset"], l["committed"])
               for l in lines if l["type"] == "dledger_entry"]
    assert entries == [(e["pos"], e["index"], e["term"], e["size"], e["bodyOffset"], True)
                       for e in of_type(name, "dledger_entry")]
    units = [(l["slot"], l["pos"], l["size"], l["index"], l["term"]) for l in lines if l["type"] == "dledger_index_unit"]
    assert units == [(u["slot"], u["pos"], u["size"], u["index"], u["term"]) for u in of_type(name, "dledger_index_unit")]
    summary = lines[-1]
    (end,) = of_type(name, "dledger_data_end")
    assert (summary["entries"], summary["blanks"], summary["endOffset"], summary["problems"]) == \
        (end["entries"], end["blanks"], end["endOffset"], 0)


def test_one_data_file_dumps_as_a_commitlog(extracted, run_cli):
    store = extracted("dledger1")
    result = run_cli("dump", data_dir(store) / "00000000000000065536", "--json", "--no-body")
    assert result.code == 0, result.err
    ours = [l["commitLogOffset"] for l in result.json_lines() if l["type"] == "message"]
    theirs = [r["offset"] for r in of_type("dledger1", "commitlog_record") if 65536 <= r["offset"] < 131072]
    assert ours == theirs and ours


def test_get_by_queue_offset_and_stats(extracted, run_cli):
    store = extracted("dledger3-n2")
    unit = of_type("dledger3-n2", "cq_unit")[-1]
    got = run_cli("get", store, "--topic", unit["topic"], "--queue", unit["queueId"], "--offset", unit["offset"],
                  "--json")
    assert got.code == 0, got.err
    assert [l["commitLogOffset"] for l in got.json_lines() if l["type"] == "message"] == [unit["commitLogOffset"]]
    stats = run_cli("stats", store, "--json")
    assert stats.code == 0, stats.err
    assert stats.json_lines()[-1]["messages"] == len(of_type("dledger3-n2", "commitlog_record"))


def test_stats_counts_the_replicas_of_one_group_once_and_says_so(extracted, run_cli):
    """dledger3's three nodes hold one group's 200 messages (n2 the first 100): stats over the
    three counts them once, from a replica with every entry, and says which."""
    group = extracted("dledger3-n0").parent
    result = run_cli("stats", group, "--json")
    assert result.code == 0, result.err
    lines = result.json_lines()
    assert lines[-1]["messages"] == len(of_type("dledger3-n0", "commitlog_record")) == 200
    (replicas,) = [l for l in lines if l["type"] == "replicas"]
    held = {Path(r["store"]).name: r["entries"] for r in replicas["replicas"]}
    assert held == {"store-n0": 200, "store-n1": 200, "store-n2": 100}
    assert Path(replicas["counted"]).name == "store-n0"
    assert [l["broker"] for l in lines if l["type"] == "store"] == [replicas["broker"]]
    text = run_cli("stats", group)
    assert "replicas of one DLedger group" in text.err and "counted once" in text.err
    n2 = run_cli("stats", extracted("dledger3-n2"), extracted("dledger3-n0"), "--json").json_lines()
    assert n2[-1]["messages"] == 200       # whichever is given first, the replica with every entry counts


def test_stats_names_a_store_after_the_broker_its_configuration_names(extracted, run_cli):
    from conftest import fixture_dir
    conf = fixture_dir("dledger3-n0") / "broker-n0.conf"
    name = [line.split("=", 1)[1].strip() for line in conf.read_text().splitlines() if line.startswith("brokerName=")]
    lines = run_cli("stats", extracted("dledger3-n0"), "--config", conf, "--json").json_lines()
    assert name == ["broker-a"] and {l["broker"] for l in lines if "broker" in l} == {"broker-a"}
    named = run_cli("stats", f"mine={extracted('dledger3-n0')}", "--config", conf, "--json").json_lines()
    assert {l["broker"] for l in named if "broker" in l} == {"mine"}     # NAME=DIR still names it


# ------------------------------------------------------------------ verify-crc

def _set_committed(store: Path, index: int) -> None:
    (data_dir(store).parent / "checkpoint").write_text(f"committedIndex={index}\nendIndex=199\n")


def test_entries_past_the_committed_index_are_uncommitted_not_damage(store_copy, run_cli):
    store = store_copy("dledger1")
    _set_committed(store, 150)
    verify = run_cli("verify-crc", store, "--json")
    assert verify.code == 0, verify.out
    assert verify.json_lines()[-1]["dledgerUncommittedEntries"] == 49
    dump = run_cli("dump", store, "dledger", "--json").json_lines()
    flags = [(l["index"], l["committed"]) for l in dump if l["type"] == "dledger_entry"]
    assert flags == [(i, i <= 150) for i in range(200)]
    (info,) = run_cli("info", store, "--json").json_lines()
    entry_151 = next(e for e in of_type("dledger1", "dledger_entry") if e["index"] == 151)
    assert (info["dledger"]["committedIndex"], info["dledger"]["uncommittedEntries"]) == (150, 49)
    assert info["dledger"]["committedPos"] == entry_151["pos"]
    text = run_cli("verify-crc", store)
    assert "49 DLedger entries past the committed index" in text.err


def _entry(name, index):
    return next(e for e in of_type(name, "dledger_entry") if e["index"] == index)


def _patch(path: Path, offset: int, data: bytes) -> None:
    with open(path, "r+b") as fh:
        fh.seek(offset)
        fh.write(data)


def test_an_entry_whose_pos_field_lies_is_damage_at_its_offset(store_copy, run_cli):
    store = store_copy("dledger1")
    e = _entry("dledger1", 42)
    _patch(data_dir(store) / e["file"], e["filePos"] + fmt.POS_OFFSET, struct.pack(">q", e["pos"] + 1))
    verify = run_cli("verify-crc", store, "--json")
    assert verify.code == 1
    problems = [l for l in verify.json_lines() if l["type"] == "problem"]
    assert problems[0]["kind"] == "bad-entry" and problems[0]["offset"] == e["pos"]
    assert "pos field" in problems[0]["message"]
    assert "Traceback" not in verify.err


def test_an_index_unit_that_disagrees_with_its_entry(store_copy, run_cli):
    store = store_copy("dledger3-n1")
    e = _entry("dledger3-n1", 7)
    index = data_dir(store).parent / "index" / "00000000000000000000"
    _patch(index, 7 * fmt.INDEX_UNIT_SIZE + 24, struct.pack(">q", 5))     # the unit's term
    verify = run_cli("verify-crc", store, "--json")
    assert verify.code == 1
    (problem,) = [l for l in verify.json_lines() if l["type"] == "problem"]
    assert (problem["kind"], problem["offset"]) == ("index-unit-mismatch", e["pos"])
    assert "term 5" in problem["message"]


# ------------------------------------------------------------------ writers

@pytest.mark.parametrize("command", [["append", "--topic", "T", "--body", "x"], ["clean", "--force"],
                                     ["salvage", "{tmp}/out"]])
def test_writers_that_cannot_keep_dledger_refuse_and_change_nothing(command, store_copy, tmp_path, run_cli):
    store = store_copy("dledger1")
    before = snapshot(store)
    args = [a.replace("{tmp}", str(tmp_path)) for a in command]
    result = run_cli(args[0], store, *args[1:])
    assert result.code == 3, (result.out, result.err)
    assert "dledger" in result.err and "Traceback" not in result.err
    assert snapshot(store) == before


def _units(run_cli, store):
    lines = run_cli("dump", store, "consumequeue", "--json").json_lines()
    return sorted((l["topic"], l["queueId"], l["offset"], l["commitLogOffset"], l["size"], l["tagsCode"])
                  for l in lines if l["type"] == "cq_unit")


def _broker_units(name):
    return sorted((u["topic"], u["queueId"], u["offset"], u["commitLogOffset"], u["size"], u["tagsCode"])
                  for u in of_type(name, "cq_unit"))


@pytest.mark.parametrize("name", ["dledger1", "dledger3-n2"])
def test_rebuild_cq_rebuilds_the_brokers_queues_and_index_from_the_entries(name, store_copy, run_cli):
    store = store_copy(name)
    shutil.rmtree(store / "consumequeue")
    shutil.rmtree(store / "index")
    result = run_cli("rebuild-cq", store, "--index", *SIZES)
    assert result.code == 0, result.err
    assert _units(run_cli, store) == _broker_units(name)
    assert run_cli("verify-crc", store).code == 0
    query = of_type(name, "index_query")[0]
    found = run_cli("lookup-by-key", store, "--topic", query["topic"], query["key"], "--json")
    assert sorted(m["commitLogOffset"] for m in found.json_lines() if m["type"] == "message") == \
        sorted(set(query["commitLogOffsets"]))


def test_a_crashed_copy_without_its_checkpoint_gets_back_every_entry(store_copy, run_cli):
    """A broker killed before DLedger's first checkpoint, with its last messages put but not
    dispatched: DLedgerCommitLog's abnormal recovery dispatches every entry the walk accepts."""
    store = store_copy("dledger1")
    folder = data_dir(store).parent
    (folder / "checkpoint").unlink()
    (folder / "checkpoint.bak").unlink()
    (store / "abort").write_text(str(os.getpid() + 10_000_000))
    # the undispatched tail: the consume queue units of the last 30 records are not there
    tail = {r["offset"] for r in of_type("dledger1", "commitlog_record")[-30:]}
    for unit in of_type("dledger1", "cq_unit"):
        if unit["commitLogOffset"] in tail:
            path = store / "consumequeue" / unit["topic"] / str(unit["queueId"]) / "00000000000000000000"
            _patch(path, unit["offset"] * 20, bytes(20))
    assert run_cli("verify-crc", store).code == 1
    (info,) = run_cli("info", store, "--json").json_lines()
    assert info["dledger"]["committedIndex"] == -1 and info["dledger"]["uncommittedEntries"] == 200
    result = run_cli("recover", store, *SIZES, "--json")
    assert result.code == 0, result.err
    (plan,) = result.json_lines()
    assert plan["mode"] == "abnormal" and plan["cut"] == 298695
    assert _units(run_cli, store) == _broker_units("dledger1")
    assert not (store / "abort").exists()
    assert len(list(data_dir(store).iterdir())) == 5


# ------------------------------------------------------------------ diff

def test_diff_of_two_peers_holding_the_same_entries(extracted, run_cli):
    result = run_cli("diff", extracted("dledger3-n0"), extracted("dledger3-n1"), "--json")
    assert result.code == 0, result.out
    (summary,) = result.json_lines()
    assert summary["same"] is True and summary["divergedAt"] is None
    assert summary["commonRecords"] == 200 and summary["onlyInA"] == summary["onlyInB"] == 0


@pytest.mark.parametrize("order", ["n0 n2", "n2 n0"])
def test_diff_of_a_peer_that_fell_behind(order, extracted, run_cli):
    first, second = order.split()
    before = snapshot(extracted("dledger3-n2"))
    result = run_cli("diff", extracted(f"dledger3-{first}"), extracted(f"dledger3-{second}"), "--json")
    assert result.code == 1
    lines = result.json_lines()
    summary = lines[-1]
    held = {m["uniqKey"] for m in of_type("dledger3-n2", "message")}
    missing = {m["message"]["uniqKey"]: m for m in of_type("dledger3-n0", "commitlog_record")
               if m["message"]["uniqKey"] not in held}
    assert len(missing) == 100
    side = "A" if first == "n0" else "B"
    only = [l for l in lines if l["type"] == "only"]
    assert {l["side"] for l in only} == {side}
    assert {l["uniqKey"] for l in only} == set(missing)
    for line in only:
        broker = missing[line["uniqKey"]]
        assert (line["offset"], line["topic"], line["queueId"], line["queueOffset"], line["msgId"], line["keys"]) == \
            (broker["offset"], broker["dispatch"]["topic"], broker["dispatch"]["queueId"],
             broker["dispatch"]["consumeQueueOffset"], broker["message"]["msgId"], broker["dispatch"]["keys"])
    entry_100 = _entry("dledger3-n0", 100)
    assert summary["divergedAt"] == entry_100["bodyOffset"]
    n0 = summary["a" if first == "n0" else "b"]
    assert n0["entryAtDivergence"] == {"index": 100, "term": 1, "pos": entry_100["pos"]}
    assert (summary["onlyInA"], summary["onlyInB"]) == ((100, 0) if first == "n0" else (0, 100))
    assert summary["commonRecords"] == 100
    short = "B" if first == "n0" else "A"      # n2 holds the first 100 of n0's 200: behind, not diverged
    assert summary["endsEarlier"] == short
    text = run_cli("diff", extracted(f"dledger3-{first}"), extracted(f"dledger3-{second}"))
    assert f"{short} ends earlier" in text.out and "diverged at" not in text.out + text.err
    assert f"({short} ends earlier, at offset {summary['divergedAt']})" in text.err
    assert snapshot(extracted("dledger3-n2")) == before


def _cut_copy(store: Path, offset: int, target: Path) -> Path:
    """A slave that copied the master's commitlog up to offset: the bytes from there are zeros and
    later files are absent."""
    shutil.copytree(store, target)
    for path in sorted((target / "commitlog").iterdir()):
        start = int(path.name)
        size = path.stat().st_size
        if start >= offset:
            path.unlink()
        elif start + size > offset:
            _patch(path, offset - start, bytes(start + size - offset))
    return target


@pytest.mark.parametrize("where", ["boundary", "mid-record"])
def test_diff_of_a_master_and_a_slave_that_copied_a_prefix(where, extracted, tmp_path, run_cli):
    name = "multifile"
    records = of_type(name, "commitlog_record")
    k = len(records) * 2 // 3
    cut = records[k]["offset"] + (0 if where == "boundary" else records[k]["size"] // 2)
    slave = _cut_copy(extracted(name), cut, tmp_path / "slave")
    result = run_cli("diff", extracted(name), slave, "--json")
    assert result.code == 1
    lines = result.json_lines()
    summary = lines[-1]
    assert summary["divergedAt"] == records[k]["offset"]
    assert summary["commonRecords"] == k
    only = [l["offset"] for l in lines if l["type"] == "only"]
    assert only == [r["offset"] for r in records[k:]]
    assert summary["onlyInB"] == 0
    problems = [l for l in lines if l["type"] == "problem"]
    assert (problems == []) == (where == "boundary")
    if problems:
        assert problems[0]["side"] == "B" and problems[0]["offset"] == records[k]["offset"]


def test_rebuild_cq_dispatches_the_committed_entries_only(store_copy, run_cli):
    """After a clean shutdown a broker's reput stops at committedPos: entries past the committed
    index get no consume queue units until a quorum confirms them."""
    store = store_copy("dledger1")
    _set_committed(store, 150)
    result = run_cli("rebuild-cq", store, *SIZES)
    assert result.code == 0, result.err
    end = _entry("dledger1", 151)["pos"]
    assert _units(run_cli, store) == [u for u in _broker_units("dledger1") if u[3] < end]
    assert len(_units(run_cli, store)) == 151


def test_recover_after_a_clean_shutdown_dispatches_up_to_the_committed_entries(store_copy, run_cli):
    store = store_copy("dledger1")
    _set_committed(store, 150)
    shutil.rmtree(store / "consumequeue")
    shutil.rmtree(store / "index")
    result = run_cli("recover", store, *SIZES, "--json")
    assert result.code == 0, result.err
    (plan,) = result.json_lines()
    assert plan["mode"] == "normal" and plan["cut"] == 298695
    assert plan["dispatchEnd"] == _entry("dledger1", 151)["pos"]
    assert len(_units(run_cli, store)) == 151
    assert len(list(data_dir(store).iterdir())) == 5          # the uncommitted entries stay


@pytest.mark.parametrize("file", ["dledger-n0/checkpoint", "dledger-n0/currterm", "dledger-n0/index/00000000000000000000"])
def test_dledgers_own_files_are_not_dumped_as_rocketmq_files(file, extracted, run_cli):
    result = run_cli("dump", extracted("dledger1") / file)
    assert result.code == 2 and "dump STORE dledger" in result.err and "Traceback" not in result.err


# ------------------------------------------------------------------ hostile DLedger stores

READERS = [
    ("info", "--json", "{store}"),
    ("dump", "{store}", "commitlog", "--json", "--no-body"),
    ("dump", "{store}", "dledger", "--json"),
    ("verify-crc", "{store}"),
    ("lookup-by-key", "{store}", "--topic", "OrderTopicD", "ord-12"),
    ("stats", "{store}"),
    ("diff", "{store}", "{pristine}", "--json"),
    ("recover", "--dry-run", "{store}"),
]


def _mutate(store: Path, rng) -> str:
    """One random change to a DLedger copy's data, index or state files."""
    data = sorted(data_dir(store).iterdir())
    folder = data_dir(store).parent
    what = rng.choice(["flip", "zero", "truncate", "garbage-state", "index-flip"])
    if what in ("flip", "zero"):
        path = rng.choice(data)
        at = rng.randrange(0, 65536 - 64)
        _patch(path, at, bytes(rng.randrange(256) for _ in range(4)) if what == "flip" else bytes(48))
        return f"{what} {path.name}@{at}"
    if what == "truncate":
        path = rng.choice(data)
        size = rng.randrange(0, 65536)
        os.truncate(path, size)
        return f"truncate {path.name} to {size}"
    if what == "garbage-state":
        name = rng.choice(["checkpoint", "currterm"])
        (folder / name).write_bytes(bytes(rng.randrange(256) for _ in range(rng.randrange(0, 40))))
        return f"garbage {name}"
    at = rng.randrange(0, 100) * fmt.INDEX_UNIT_SIZE + rng.randrange(32)
    _patch(folder / "index" / "00000000000000000000", at, bytes([rng.randrange(256)]))
    return f"index byte {at}"


def light_snapshot(root) -> dict:
    """snapshot() (test_info_and_layout), with files of 16 MiB or more (DLedger's index file) by
    their size and times only: hashing its 160 MiB for every command would be most of the time."""
    state = {}
    for dirpath, _, filenames in os.walk(root):
        st = os.stat(dirpath)
        state[dirpath] = ("dir", st.st_mtime_ns, st.st_atime_ns)
        for name in filenames:
            path = os.path.join(dirpath, name)
            st = os.stat(path)
            if st.st_size >= 1 << 24:
                state[path] = (st.st_size, st.st_mtime_ns, st.st_atime_ns)
                continue
            fd = os.open(path, os.O_RDONLY | os.O_NOATIME)
            try:
                state[path] = (os.read(fd, st.st_size + 1), st.st_mtime_ns, st.st_atime_ns)
            finally:
                os.close(fd)
    return state


@pytest.mark.parametrize("seed", range(10))
def test_no_command_fails_inside_on_a_damaged_dledger_store(seed, store_copy, extracted, run_cli):
    import random

    rng = random.Random(26_000 + seed)
    store = store_copy("dledger3-n2")
    said = [_mutate(store, rng) for _ in range(rng.choice([1, 2]))]
    result = readers_then_recover(run_cli, store, extracted("dledger3-n0"), said, READERS)
    if result.code == 0:
        assert run_cli("verify-crc", store).code == 0, said


def readers_then_recover(run_cli, store, pristine, said, readers):
    """Every reader on a damaged store answers with an exit code and changes nothing; then recover
    fails inside neither (its Result returned).  said: the damage, for the messages."""
    for command in readers:
        args = [a.format(store=store, pristine=pristine) for a in command]
        before = light_snapshot(store)
        result = run_cli(*args)
        assert result.code in (0, 1, 2, 3, 4), (said, args, result.code, result.err)
        assert "Traceback" not in result.err and "internal error" not in result.err, (said, args, result.err)
        assert light_snapshot(store) == before, (said, args)
    result = run_cli("recover", store)
    assert result.code in (0, 1, 3, 4) and "internal error" not in result.err, (said, result.err)
    return result


def test_diff_of_replicas_that_hold_a_different_message_at_one_offset(extracted, tmp_path, run_cli):
    """Past the common prefix messages are matched by identity: one record rewritten (another
    UNIQ_KEY, same size) is one message only in A and one only in B; every later one is held by
    both."""
    name = "multifile"
    records = of_type(name, "commitlog_record")
    k = len(records) // 2
    record = records[k]
    other = tmp_path / "other"
    shutil.copytree(extracted(name), other)
    path = sorted(p for p in (other / "commitlog").iterdir() if int(p.name) <= record["offset"])[-1]
    raw = path.read_bytes()
    at = raw.index(record["message"]["uniqKey"].encode(), record["offset"] - int(path.name))
    _patch(path, at, b"F" if raw[at:at + 1] != b"F" else b"E")
    result = run_cli("diff", extracted(name), other, "--json")
    assert result.code == 1
    lines = result.json_lines()
    summary = lines[-1]
    assert (summary["divergedAt"], summary["reason"]) == (record["offset"], "different records at this offset")
    assert summary["commonRecords"] == k
    only = [(l["side"], l["offset"]) for l in lines if l["type"] == "only"]
    assert only == [("A", record["offset"]), ("B", record["offset"])]
    assert summary["heldByBothPastDivergence"] == len(records) - k - 1


# ------------------------------------------------------------------ parts for --jobs

def test_a_data_file_is_cut_into_parts_at_entry_starts_and_its_parts_read_as_the_whole(extracted):
    """Plain commitlog files are cut into parts that --jobs walks in parallel; a DLedger data file
    is cut too, at entries' starts, and its parts' records are the whole file's."""
    from mqtool.native import fastscan
    from mqtool.storage import commitlog

    path = sorted(data_dir(extracted("dledger1")).iterdir())[0]
    mf = MappedFile(path, 65536, strict=False)
    try:
        starts = [e["filePos"] for e in of_type("dledger1", "dledger_entry") if e["file"] == path.name]
        cuts = fastscan.split_points(mf, 8192, entries=commitlog.is_dledger_file(mf))
        assert len(cuts) >= 3 and set(cuts) <= set(starts)

        def offsets(start, stop):
            out = []
            for item in commitlog.walk_file(mf, start=start, stop=stop, scanner=fastscan, is_last=False):
                if isinstance(item, fastscan.Chunk):
                    out += item.columns["offset"].tolist()
                    assert item.columns["entry_index"].tolist() == \
                        [_entry_at(o - fmt.HEADER_SIZE)["index"] for o in item.columns["offset"].tolist()]
                elif type(item).__name__ == "Record":
                    out.append(item.offset)
            return out

        edges = [0] + cuts + [None]
        assert sum((offsets(a, b) for a, b in zip(edges, edges[1:])), []) == offsets(0, None) == \
            [e["pos"] + fmt.HEADER_SIZE for e in of_type("dledger1", "dledger_entry") if e["file"] == path.name]
    finally:
        mf.close()


def _entry_at(pos):
    return next(e for e in of_type("dledger1", "dledger_entry") if e["pos"] == pos)


# ------------------------------------------------------------------ after a crash
# Copies of dledger1 as a crash (or damage) leaves them, and what DLedgerMmapFileStore.recover
# (DLedger 0.3.1.2) keeps of each: it walks the entries from the third-last data file and ends the
# data at the first entry it does not accept (magic, size, pos field, body length; an index that
# is not the one before's + 1; a term lower than the one before's), keeping every entry before it
# whatever its body holds; index units that disagree with the data are rewritten from it.  After
# a crash (abort file) DLedgerCommitLog dispatches the records of the kept entries up to the
# first that is not a valid record, and truncates the queues there.

def _crashed(store_copy, how: str, abort: bool = True) -> Path:
    store = store_copy("dledger1")
    data, index_file = data_dir(store), data_dir(store).parent / "index" / "00000000000000000000"
    last = _entry("dledger1", 199)
    if how == "torn-body":         # the header written, the body's second half not
        body = last["size"] - fmt.HEADER_SIZE
        _patch(data / last["file"], last["filePos"] + fmt.HEADER_SIZE + body // 2, bytes(body - body // 2))
    elif how == "torn-header":     # the header's first 20 bytes written
        _patch(data / last["file"], last["filePos"] + 20, bytes(last["size"] - 20))
    elif how == "zeroed-tail":     # entries 190 on lost (zeros), their index units still there
        e = _entry("dledger1", 190)
        _patch(data / e["file"], e["filePos"], bytes(65536 - e["filePos"]))
    elif how == "index-short":     # the last ten index units not written
        _patch(index_file, 190 * fmt.INDEX_UNIT_SIZE, bytes(10 * fmt.INDEX_UNIT_SIZE))
    elif how == "term-back":       # entries 100-149 in term 1, 150 on in term 0 (index units alike)
        for i in range(100, 150):
            e = _entry("dledger1", i)
            _patch(data / e["file"], e["filePos"] + 16, struct.pack(">q", 1))
            _patch(index_file, i * fmt.INDEX_UNIT_SIZE + 24, struct.pack(">q", 1))
    elif how == "index-gap":       # entry 150 says it is 151 (its index unit too)
        e = _entry("dledger1", 150)
        _patch(data / e["file"], e["filePos"] + 8, struct.pack(">q", 151))
        _patch(index_file, 150 * fmt.INDEX_UNIT_SIZE + 16, struct.pack(">q", 151))
    if abort:
        (store / "abort").write_text(str(os.getpid() + 10_000_000))
    return store


def _ledger_end(run_cli, store) -> tuple:
    (info,) = run_cli("info", store, "--json").json_lines()
    return info["dledger"]["ledgerEndIndex"], info["dledger"]["committedPos"]


@pytest.mark.parametrize("how, kept", [("torn-header", 199), ("zeroed-tail", 190), ("term-back", 150),
                                       ("index-gap", 150)])
def test_recover_ends_the_data_where_dledgers_recovery_ends_it(how, kept, store_copy, run_cli):
    """kept: the entries DLedger keeps (0 to kept - 1); the queues get their records, no more."""
    store = _crashed(store_copy, how)
    end = _entry("dledger1", kept)["pos"]
    result = run_cli("recover", store, *SIZES, "--json")
    assert result.code == 0, result.err
    (plan,) = result.json_lines()
    assert plan["cut"] == end
    assert _ledger_end(run_cli, store) == (kept - 1, end)
    assert _units(run_cli, store) == [u for u in _broker_units("dledger1") if u[3] < end]
    assert sorted(p.name for p in data_dir(store).iterdir()) == \
        sorted({e["file"] for e in of_type("dledger1", "dledger_entry") if e["pos"] < end})
    assert run_cli("verify-crc", store).code == 0
    expected = [u[:5] + ((1,) if how == "term-back" and 100 <= u[0] < 150 else u[5:])   # as _crashed wrote them
                for u in _broker_index_units(kept)]
    assert _index_units(run_cli, store) == expected     # none past the kept entries


def _index_units(run_cli, store):
    lines = run_cli("dump", store, "dledger", "--json").json_lines()
    return [(l["slot"], l["magic"], l["pos"], l["size"], l["index"], l["term"])
            for l in lines if l["type"] == "dledger_index_unit"]


def _broker_index_units(count):
    return [(u["slot"], u["magic"], u["pos"], u["size"], u["index"], u["term"])
            for u in of_type("dledger1", "dledger_index_unit")][:count]


def test_a_torn_last_entry_stays_in_the_ledger_and_its_record_is_not_dispatched(store_copy, run_cli):
    """DLedger reads no record: an entry whose header is whole stays, torn body and all; the
    broker's dispatch stops at its record, and the queues end before it."""
    store = _crashed(store_copy, "torn-body")
    last = _entry("dledger1", 199)
    before = (data_dir(store) / last["file"]).read_bytes()
    assert _ledger_end(run_cli, store) == (199, last["pos"] + last["size"])
    result = run_cli("recover", store, *SIZES, "--json")
    (plan,) = [l for l in result.json_lines() if l["type"] == "plan"]
    assert (plan["cut"], plan["bytesCut"], plan["dispatchEnd"]) == (last["pos"] + last["size"], 0, last["pos"])
    assert (data_dir(store) / last["file"]).read_bytes() == before
    assert _units(run_cli, store) == [u for u in _broker_units("dledger1") if u[3] < last["pos"]]
    assert result.code == 1 and "bad-entry-body" in result.out    # the torn record is left, and said


def test_an_index_short_of_the_data_still_says_where_the_committed_entries_end(store_copy, run_cli):
    """Index units written after the data (a crash between the two, or units lost): DLedger's
    recovery rewrites them from the entries, and committedPos is the committed entry's end."""
    store = _crashed(store_copy, "index-short", abort=False)
    tail = {r["offset"] for r in of_type("dledger1", "commitlog_record")[-30:]}     # not dispatched yet
    for unit in of_type("dledger1", "cq_unit"):
        if unit["commitLogOffset"] in tail:
            path = store / "consumequeue" / unit["topic"] / str(unit["queueId"]) / "00000000000000000000"
            _patch(path, unit["offset"] * 20, bytes(20))
    assert _ledger_end(run_cli, store) == (199, 298695)
    result = run_cli("recover", store, *SIZES, "--json")
    assert result.code == 0, result.out
    (plan,) = result.json_lines()
    assert (plan["cut"], plan["dispatchEnd"]) == (298695, None)
    assert plan["dledgerIndex"] == {"rewriteFromIndex": 190, "endIndex": 200, "unitsCut": 0}
    assert _units(run_cli, store) == _broker_units("dledger1")
    assert _index_units(run_cli, store) == _broker_index_units(200)      # written back as DLedger writes them


def test_stale_index_units_are_written_from_the_entries_with_the_old_ones_kept(store_copy, run_cli):
    store = _crashed(store_copy, "index-short")
    index_file = data_dir(store).parent / "index" / "00000000000000000000"
    _patch(index_file, 195 * fmt.INDEX_UNIT_SIZE + 24, struct.pack(">q", 7))       # a unit from another term
    _patch(index_file, 200 * fmt.INDEX_UNIT_SIZE, b"\x00\x00\x00\x01" + bytes(27) + b"\x05")  # one past the end
    result = run_cli("recover", store, *SIZES, "--json")
    assert result.code == 0, result.out
    (plan,) = result.json_lines()
    assert plan["dledgerIndex"] == {"rewriteFromIndex": 190, "endIndex": 200, "unitsCut": 1}
    assert _index_units(run_cli, store) == _broker_index_units(200)
    old_units = bytearray(10 * fmt.INDEX_UNIT_SIZE)
    old_units[5 * fmt.INDEX_UNIT_SIZE + 24:6 * fmt.INDEX_UNIT_SIZE] = struct.pack(">q", 7)
    saved = {p.name.rsplit(".", 2)[1]: p.read_bytes() for p in store.glob("quarantine/*/dledger-n0/index/*.bin")}
    assert saved == {"6080-6400": bytes(old_units), "6400-6432": b"\x00\x00\x00\x01" + bytes(27) + b"\x05"}


def test_verify_says_once_that_an_entry_has_no_index_unit_yet(store_copy, run_cli):
    """A unit of zeros was never written (a crash between the data and the index): one finding per
    entry, not one per field the zeros disagree with."""
    store = _crashed(store_copy, "index-short")
    verify = run_cli("verify-crc", store, "--scope", "commitlog", "--json")
    problems = [(l["kind"], l["offset"], l["message"]) for l in verify.json_lines() if l["type"] == "problem"]
    assert problems == [("index-unit-mismatch", _entry("dledger1", i)["pos"], f"entry {i}: no index unit")
                        for i in range(190, 200)]


@pytest.mark.parametrize("name", ["dledger1", "dledger3-n2"])
def test_recover_plan_walks_the_entries_once(name, extracted, run_cli, monkeypatch):
    """recover's plan hands the ledger's end its own walk found (recovery.ledger_cut) to
    dispatch_end, which then does not walk the entries again; the plan is the one the entry
    walk gives."""
    real, handed = dledger.read_ledger, []

    def spy(layout, queue, end=None):
        handed.append(end)
        return real(layout, queue, end)

    monkeypatch.setattr(dledger, "read_ledger", spy)
    given = run_cli("recover", "--dry-run", "--json", extracted(name))
    assert handed and handed[0] is not None
    monkeypatch.setattr(dledger, "read_ledger", lambda layout, queue, end=None: real(layout, queue))
    walked = run_cli("recover", "--dry-run", "--json", extracted(name))
    assert (given.code, given.out) == (walked.code, walked.out) and "dispatchEnd" in given.out
