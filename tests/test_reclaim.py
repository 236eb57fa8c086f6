"""Reclaim (mqtool/engine/reclaim.py, `mqtool clean`): RocketMQ's expiry rules, Kafka-style retention,
staged deletion and undo, on copies of the broker-written fixtures and on stores mqtool writes.

Time never passes by itself here: the hour window and the delete delay read the store's
ManualClock, file ages are set with os.utime, and the disk is a DiskUsage the test passes to
the store (a fake whose used bytes follow the store's files, so deleting frees and staging
does not).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import pytest
from test_store_engine import _msg, fixture_config

from mqtool.engine.clock import ManualClock
from mqtool.engine.diskusage import DiskUsage, Usage
from mqtool.engine.reclaim import Policy
from mqtool.engine.store import MessageStore
from mqtool.forensics import verify
from mqtool.formats import configjson
from mqtool.formats.commitlog import Record
from mqtool.formats.consumequeue import UNIT_SIZE
from mqtool.formats.filenames import is_index_name, is_offset_name
from mqtool.storage import commitlog, consumequeue
from mqtool.storage.config import apply_settings
from mqtool.storage.consumequeue import queue_min_offset
from mqtool.storage.layout import discover

from conftest import expected_read

REPO = Path(__file__).resolve().parent.parent
HOUR = 3600 * 1000
FILE = 65536                       # the fixtures' commitlog file size
CQ_FILE = 6000


def local_ms(hour: int, minute: int = 30, day: int = 23) -> int:
    """Epoch ms of a local time (deleteWhen hours are the broker's local hours)."""
    return int(datetime(2026, 11, day, hour, minute).timestamp() * 1000)


def tree_bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


class FakeDisk(DiskUsage):
    """A disk of `total` bytes on which the store's files sit next to `other` bytes of something
    else: deleting store files frees space, moving them into STORE/trash/ does not."""

    def __init__(self, root: Path, total: int, other: int):
        self.root, self.total, self.other = root, total, other
        self.calls = 0

    @classmethod
    def at(cls, root: Path, ratio: float, total: int = 10 * 1024 * 1024) -> "FakeDisk":
        return cls(root, total, int(ratio * total) - tree_bytes(root))

    def usage(self, path) -> Usage:
        self.calls += 1
        return Usage(total=self.total, used=self.other + tree_bytes(self.root))


class FixedDisk(DiskUsage):
    def __init__(self, ratio: float):
        self.ratio = ratio

    def usage(self, path) -> Usage:
        return Usage(total=1000, used=round(self.ratio * 1000))


def commitlog_names(root: Path) -> list[str]:
    return sorted(p.name for p in (root / "commitlog").iterdir())


def age(root: Path, now_ms: int, hours: float, first: int = 0, count: int | None = None) -> None:
    """Set the mtime of commitlog files [first, first+count) to `hours` before now."""
    names = commitlog_names(root)
    for name in names[first:None if count is None else first + count]:
        t = (now_ms - hours * HOUR) / 1000
        os.utime(root / "commitlog" / name, (t, t))


def open_store(root, name="multifile", *, clock, disk=None, **extra) -> MessageStore:
    config = fixture_config(root, name, **extra)
    return MessageStore(config, clock=clock, disk_usage=disk or FixedDisk(0.10), start_services=False).open()


def actions(report, kind="commitlog"):
    return [(d.file.split("/")[-1], d.action, d.reason) for d in report.decisions if d.kind == kind]


# --------------------------------------------------------------------- consistency
# Stand-in for `mqtool verify-crc --scope all` (not in this tree when these tests were written).
# When it is, check_consistent can become: assert run_cli("verify-crc", root, "--scope", "all").code == 0,
# keeping the reachable-units result the tests compare against the broker's expected reads.

def check_consistent(root: Path, name: str = "multifile") -> dict:
    """Everything a broker's load and reads need after a clean: every file at its mapped size with
    its numeric name, the commitlog without holes and every record's CRC right, every consume queue
    unit from the queue's min offset on pointing at a record of its topic, queue, size and queue
    offset, no consume queue file but a queue's last one wholly below the commitlog's min offset,
    no index file but the last below it.  Returns the reachable units
    {(topic, queueId, queueOffset): (commitLogOffset, size)}."""
    config = fixture_config(root, name)
    layout = discover(config, config_given=True)
    found = []
    assert verify.verify(layout, on_finding=found.append).problems == 0, found   # verify-crc --scope all
    for kind in ("commitlog", "consumequeue", "index"):
        assert not (root / kind / "trash").exists()
    files = layout.commitlog_files()
    assert files and all(is_offset_name(f.name) and f.size == FILE for f in files)
    starts = [int(f.name) for f in files]
    assert starts == list(range(starts[0], starts[0] + FILE * len(starts), FILE)), "a hole in the commitlog"
    cl_min = starts[0]
    queue = commitlog.open_queue(layout)
    try:
        records = {}
        for entry in commitlog.walk(queue):
            assert not hasattr(entry, "kind"), entry          # no Problem anywhere
            if isinstance(entry, Record):
                assert entry.crc_ok()
                records[entry.offset] = entry
    finally:
        queue.close()
    reachable = {}
    for cq in consumequeue.open_all(layout):
        try:
            cq_files = cq.files.files
            assert all(is_offset_name(mf.file_name) and mf.file_size == CQ_FILE for mf in cq_files)
            for mf in cq_files[:-1]:
                last = int.from_bytes(mf.buf[CQ_FILE - UNIT_SIZE:CQ_FILE - UNIT_SIZE + 8], "big")
                assert last >= cl_min, f"{mf.path} points only at deleted commitlog bytes"
            low = queue_min_offset(cq, cl_min)
            for unit in cq.units(low):
                rec = records.get(unit.commitlog_offset)
                assert rec is not None, (cq.topic, cq.queue_id, unit.queue_offset, unit.commitlog_offset)
                assert (rec.topic, rec.queue_id, rec.total_size, rec.queue_offset) == \
                       (cq.topic, cq.queue_id, unit.size, unit.queue_offset)
                reachable[(cq.topic, cq.queue_id, unit.queue_offset)] = (unit.commitlog_offset, unit.size)
        finally:
            cq.close()
    slots, entries = layout.index_geometry()
    index_files = layout.index_files()
    assert all(is_index_name(f.name) and f.size == 40 + slots * 4 + entries * 20 for f in index_files)
    return reachable


def broker_units(name: str, min_offset: int) -> dict:
    """The units a broker read from the untouched fixture, those at or above min_offset."""
    return {(l["topic"], l["queueId"], l["offset"]): (l["commitLogOffset"], l["size"])
            for l in expected_read(name) if l["type"] == "cq_unit" and l["commitLogOffset"] >= min_offset}


def reopen_reads(root: Path, name: str = "multifile") -> dict:
    """Open the cleaned store as a broker would (normal recovery): nothing to cut, and the
    messages it serves, read through its consume queues from each queue's min offset."""
    with MessageStore(fixture_config(root, name), start_services=False) as store:
        plan = store.recovery_plan
        assert plan.mode == "normal"
        assert plan.data_end == plan.cut and not plan.removed_files and not plan.queue_cuts
        cl_min = store.commitlog_queue.min_offset
        return {(t, q, u.queue_offset): (u.commitlog_offset, u.size)
                for (t, q), cq in store.dispatcher.queues.items()
                for u in cq.units(queue_min_offset(cq, cl_min))}


# --------------------------------------------------------------------- expiry and the hour window

def test_expired_files_go_in_the_deleteWhen_hours_oldest_first_ten_a_run(store_copy, run_cli):
    root = store_copy("multifile")
    clock = ManualClock(local_ms(4))                 # deleteWhen=04
    age(root, clock.now, 80, 0, 12)                  # 12 files older than fileReservedTime (72 h)
    age(root, clock.now, 10, 12)
    with open_store(root, clock=clock) as store:
        first = store.reclaim()
        assert actions(first)[:10] == [(f"{i * FILE:020d}", "delete", "expired") for i in range(10)]
        assert actions(first)[10] == (f"{10 * FILE:020d}", "keep", "batch-limit")
        assert "expired by 8.0 h" in first.decisions[0].why
        second = store.reclaim()
        assert actions(second) == [(f"{10 * FILE:020d}", "delete", "expired"),
                                   (f"{11 * FILE:020d}", "delete", "expired"),
                                   (f"{12 * FILE:020d}", "keep", "not-expired")]
        assert "expires in 62.0 h" in [d for d in second.decisions if d.kind == "commitlog"][-1].why
        third = store.reclaim()
        assert not third.changed and actions(third) == [(f"{12 * FILE:020d}", "keep", "not-expired")]
    assert commitlog_names(root)[0] == f"{12 * FILE:020d}"
    reachable = check_consistent(root)
    assert reachable == broker_units("multifile", 12 * FILE) == reopen_reads(root)
    (info,) = run_cli("info", root, "--json").json_lines()
    assert info["commitlog"]["minOffset"] == 12 * FILE
    expected_min = {}
    for topic, queue_id, offset in reachable:
        key = (topic, queue_id)
        expected_min[key] = min(expected_min.get(key, offset), offset)
    assert {(q["topic"], q["queueId"]): q["minOffset"] for q in info["queues"]} == expected_min
    assert all(v > 0 for v in expected_min.values())


def test_outside_the_window_expired_files_wait_and_the_reason_says_so(store_copy):
    root = store_copy("multifile")
    clock = ManualClock(local_ms(11))
    age(root, clock.now, 100)
    with open_store(root, clock=clock) as store:
        report = store.reclaim()
        assert not report.changed and not report.window_open
        (d,) = report.decisions
        assert (d.action, d.reason) == ("keep", "outside-window")
        assert "deleteWhen=04" in d.why and "expired" in d.why and "--now" in d.why
        clock.now = local_ms(4, 59)
        assert store.reclaim(Policy(max_files=1)).count("commitlog") == 1
        clock.now = local_ms(5, 0)
        assert not store.reclaim().changed
        assert store.reclaim(Policy(ignore_window=True, max_files=2)).count("commitlog") == 2   # --now
    check_consistent(root)


def test_deleteWhen_takes_several_hours(store_copy):
    root = store_copy("multifile")
    clock = ManualClock(local_ms(3))
    age(root, clock.now, 100)
    with open_store(root, clock=clock, deleteWhen="03;04") as store:
        assert store.reclaim(Policy(max_files=1)).count("commitlog") == 1
        clock.now = local_ms(4)
        assert store.reclaim(Policy(max_files=1)).count("commitlog") == 1
        clock.now = local_ms(2)
        assert not store.reclaim().changed


def test_retention_options_replace_fileReservedTime(store_copy):
    root = store_copy("multifile")
    clock = ManualClock(local_ms(4))
    age(root, clock.now, 2)
    with open_store(root, clock=clock) as store:
        assert not store.reclaim().changed                                       # 2 h < 72 h
        report = store.reclaim(Policy(retention_ms=HOUR, max_files=3))           # Kafka's retention.ms
        assert actions(report)[:3] == [(f"{i * FILE:020d}", "delete", "expired") for i in range(3)]
        assert "--retention 1.0 h" in report.decisions[0].why
        assert not store.reclaim(Policy(retention_ms=-1)).changed                # -1: no time limit


def test_broker_values_read_as_the_broker_reads_them(store_copy):
    """deleteWhen with a trailing ';' (Java's split drops the empty part), a negative
    fileReservedTime (every file expired), deleteFileBatchMax=0 (the limit is checked after a
    deletion: one file a run)."""
    from mqtool.engine.reclaim import parse_delete_when

    assert parse_delete_when("04;") == [4] and parse_delete_when("03;04;") == [3, 4]
    root = store_copy("multifile")
    clock = ManualClock(local_ms(4))
    age(root, clock.now, 1)
    with open_store(root, clock=clock, fileReservedTime=-1, deleteFileBatchMax=0, deleteWhen="04;") as store:
        report = store.reclaim()
        assert actions(report)[:2] == [(f"{0:020d}", "delete", "expired"), (f"{FILE:020d}", "keep", "batch-limit")]


# --------------------------------------------------------------------- disk levels

def test_above_diskMaxUsedSpaceRatio_expired_files_go_outside_the_window(store_copy):
    root = store_copy("multifile")
    clock = ManualClock(local_ms(15))
    age(root, clock.now, 100, 0, 3)
    age(root, clock.now, 1, 3)
    with open_store(root, clock=clock, disk=FixedDisk(0.80)) as store:       # 80 % > 75 %, < 85 %
        report = store.reclaim()
        assert actions(report) == [(f"{i * FILE:020d}", "delete", "expired") for i in range(3)] + \
                                  [(f"{3 * FILE:020d}", "keep", "not-expired")]    # unexpired stay
        assert "outside the deleteWhen hours, because the disk (80.0 %) is above diskMaxUsedSpaceRatio" \
               in report.decisions[0].why
    with open_store(root, clock=clock, disk=FixedDisk(0.80), diskMaxUsedSpaceRatio=5) as store:
        assert store.reclaimer.disk_state().ratio == 0.8
        assert not store.reclaim().changed                     # 5 is clamped to 10: 80 % is still above


def test_diskMaxUsedSpaceRatio_is_clamped_and_clean_says_so(store_copy, run_cli):
    root = store_copy("basic")
    result = run_cli("clean", root, "--set", "diskMaxUsedSpaceRatio=99")
    assert result.code == 0
    assert "diskMaxUsedSpaceRatio=99 is clamped to 95" in result.err
    assert result.out == ""


def test_force_clean_level_deletes_unexpired_files_until_the_disk_is_below_it(store_copy):
    root = store_copy("multifile")
    clock = ManualClock(local_ms(15))
    age(root, clock.now, 1)                                 # nothing expired
    disk = FakeDisk.at(root, 0.88)
    used = disk.usage(root).used
    needed = next(k for k in range(1, 44) if (used - k * FILE) / disk.total <= 0.85)
    with open_store(root, clock=clock, disk=disk, cleanFileForciblyEnable=False) as store:
        report = store.reclaim()
        assert not report.changed and actions(report)[0][2] == "not-expired"
    with open_store(root, clock=clock, disk=disk) as store:
        report = store.reclaim(Policy(max_files=40))
        assert actions(report) == [(f"{i * FILE:020d}", "delete", "disk-force-level") for i in range(needed)] + \
                                  [(f"{needed * FILE:020d}", "keep", "not-expired")]
        assert "above diskSpaceCleanForciblyRatio 85.0 %" in report.decisions[0].why
        assert any("had not expired are removed" in w for w in report.warnings)
    assert disk.usage(root).ratio <= 0.85
    check_consistent(root)


def test_force_clean_level_with_staging_warns_that_nothing_is_freed_yet(store_copy):
    root = store_copy("multifile")
    clock = ManualClock(local_ms(15))
    age(root, clock.now, 1)
    disk = FakeDisk.at(root, 0.88)
    with open_store(root, clock=clock, disk=disk) as store:
        report = store.reclaim(Policy(delete_delay_ms=60000, max_files=40))
        staged = report.count("commitlog")
        assert staged and report.count("commitlog", {"stage"}) == staged
        assert any("staged files free nothing until their delay (60 s) passes" in w and "--delete-delay 0" in w
                   for w in report.warnings)
        assert disk.usage(root).ratio > 0.85                # the files are in the trash, still on disk
        # a second run within the delay counts the staged bytes as freed: it stages nothing more
        assert store.reclaim(Policy(delete_delay_ms=60000, max_files=40)).count() == 0
        clock.advance(60001)
        later = store.reclaim(Policy(delete_delay_ms=60000, max_files=40))
        assert later.count(actions={"remove-staged"}) >= staged
    assert disk.usage(root).ratio <= 0.85
    assert not (root / "trash").exists()


def test_warning_level_refuses_puts_and_says_why(tmp_path):
    root = tmp_path / "store"
    disk = FixedDisk(0.10)
    store = MessageStore(fixture_config(root), clock=ManualClock(local_ms(10)), disk_usage=disk,
                         start_services=False).open()
    try:
        assert store.put(_msg(1)).status == "PUT_OK"
        disk.ratio = 0.95
        store.reclaim()                                     # the store looks at its disk on every run
        result = store.put(_msg(2))
        assert result.status == "SERVICE_NOT_AVAILABLE"
        assert "95.0 %" in result.remark and "diskSpaceWarningLevelRatio 90.0 %" in result.remark
        assert all(r.status == "SERVICE_NOT_AVAILABLE" for r in store.put_many([_msg(3), _msg(4)]))
        disk.ratio = 0.89
        store.reclaim()
        assert store.put(_msg(5)).status == "PUT_OK"
    finally:
        store.close()
    # a store opened on a full disk refuses from its first put
    with MessageStore(fixture_config(root), disk_usage=FixedDisk(0.91), start_services=False) as store:
        assert store.put(_msg(6)).status == "SERVICE_NOT_AVAILABLE"


@pytest.mark.parametrize("settings, fmt, ratio, refused", [
    ({"rocketmq.broker.diskSpaceWarningLevelRatio": "0.50"}, "4", 0.55, True),     # 4.9.8: JVM property
    ({"diskSpaceWarningLevelRatio": "50"}, "5", 0.55, True),                         # 5.x: store key
    ({"diskSpaceWarningLevelRatio": "99"}, "5", 0.95, True),                         # 5.x clamps to 90
    ({"diskSpaceWarningLevelRatio": "99"}, "4", 0.95, False),                        # 4.9.8 does not
])
def test_warning_level_spellings_and_clamps(tmp_path, settings, fmt, ratio, refused):
    config = apply_settings(fixture_config(tmp_path / "store", storeFormat=fmt), settings)
    with MessageStore(config, disk_usage=FixedDisk(ratio), start_services=False) as store:
        assert (store.put(_msg(1)).status == "SERVICE_NOT_AVAILABLE") == refused
        notes = store.reclaim().levels.notes
    clamped = fmt == "5" and settings.get("diskSpaceWarningLevelRatio") == "99"
    assert any("clamped to 90" in n for n in notes) == clamped


def test_force_clean_level_spellings_and_versions(store_copy):
    """4.9.8 (JVM property, a fraction) forces only in the deleteWhen hours unless the disk is also
    above diskMaxUsedSpaceRatio; 5.x (store key, a percentage) forces at any hour."""
    root = store_copy("multifile")
    clock = ManualClock(local_ms(15))
    age(root, clock.now, 1)
    config = apply_settings(fixture_config(root, "multifile"),
                            {"rocketmq.broker.diskSpaceCleanForciblyRatio": "0.50"})
    assert config.diskSpaceCleanForciblyRatio == 50
    with MessageStore(config, clock=clock, disk_usage=FixedDisk(0.60), start_services=False) as store:
        assert not store.reclaim().changed                     # 60 % > 50 %, but < 75 % and not 04:xx
        clock.now = local_ms(4)
        assert actions(store.reclaim(Policy(max_files=1)))[0][2] == "disk-force-level"
    clock.now = local_ms(15)
    config = apply_settings(fixture_config(root, "multifile", storeFormat="5"), {"diskSpaceCleanForciblyRatio": "50"})
    with MessageStore(config, clock=clock, disk_usage=FixedDisk(0.60), start_services=False) as store:
        report = store.reclaim(Policy(max_files=1))
        assert actions(report)[0][2] == "disk-force-level"
        assert "because the disk (60.0 %) is above" not in report.decisions[0].why   # not expired: no window talk


# --------------------------------------------------------------------- --force, retention bytes, losses

def write_consumer_offsets(root: Path, table: dict) -> None:
    (root / "config").mkdir(exist_ok=True)
    (root / "config" / "consumerOffset.json").write_text(configjson.dumps({"offsetTable": table}))


def test_force_deletes_unexpired_files_until_diskMaxUsedSpaceRatio_and_names_unread_losses(store_copy):
    root = store_copy("multifile")
    clock = ManualClock(local_ms(15))
    age(root, clock.now, 1)
    write_consumer_offsets(root, {"OrderTopic@billing": {0: 10, 1: 369, 2: 0, 3: 332},
                                  "AuditTopic@audit": {0: 588}})
    disk = FakeDisk.at(root, 0.78)
    used = disk.usage(root).used
    needed = next(k for k in range(1, 44) if (used - k * FILE) / disk.total <= 0.75)
    with open_store(root, clock=clock, disk=disk) as store:
        assert not store.reclaim().changed                  # 78 %: above 75 %, but nothing is expired
        report = store.reclaim(Policy(force=True, max_files=40))
        assert [a[2] for a in actions(report)] == ["forced"] * needed + ["not-expired"]
        assert "--force target met" in [d for d in report.decisions if d.kind == "commitlog"][-1].why
        mins = {(q.topic, q.queue_id): (q.min_before, q.min_after) for q in report.queues}
        losses = {(l.group, l.topic, l.queue_id): l.unread for l in report.losses}
        assert losses == {("billing", "OrderTopic", 0): mins[("OrderTopic", 0)][1] - 10,
                          ("billing", "OrderTopic", 2): mins[("OrderTopic", 2)][1]}
        assert report.unread_removed == sum(losses.values())
        assert any("consumers had NOT read" in w and "billing" in w for w in report.warnings)
    check_consistent(root)


def test_force_respects_max_files_and_never_the_active_file(tmp_path):
    """On a store mqtool writes: every file is old and the disk is full, yet the file being
    written stays, and the store goes on taking messages after the others went."""
    root = tmp_path / "store"
    clock = ManualClock(local_ms(15))
    disk = FixedDisk(0.30)
    with MessageStore(fixture_config(root), clock=clock, disk_usage=disk, start_services=False) as store:
        for i in range(400):
            m = _msg(i, queue=i % 2)
            m.body = bytes(500)
            assert store.put(m).ok
        files = len(store.commitlog_queue.files)
        assert files >= 4
        age(root, clock.now, 500)
        disk.ratio = 0.89                              # above the force level, below the warning level
        report = store.reclaim(Policy(force=True, max_files=2))
        assert actions(report) == [(f"{0:020d}", "delete", "expired"), (f"{FILE:020d}", "delete", "expired"),
                                   (f"{2 * FILE:020d}", "keep", "batch-limit")]
        report = store.reclaim(Policy(force=True, max_files=100))
        assert actions(report)[-1] == (f"{(files - 1) * FILE:020d}", "keep", "active")
        assert report.decisions[-1].why == "the file being written is never deleted"
        assert len(store.commitlog_queue.files) == 1
        result = store.put(_msg(1000, queue=1))
        assert result.ok and result.queue_offset == 200
    with MessageStore(fixture_config(root), start_services=False) as store:
        plan = store.recovery_plan
        assert plan.data_end == plan.cut and not plan.queue_cuts
        cq = store.dispatcher.queues[("T", 1)]
        units = list(cq.units(queue_min_offset(cq, store.commitlog_queue.min_offset)))
        assert units[-1].queue_offset == 200


def test_retention_bytes_deletes_oldest_files_while_the_commitlog_is_over(store_copy):
    root = store_copy("multifile")
    clock = ManualClock(local_ms(4))
    age(root, clock.now, 1)
    with open_store(root, clock=clock) as store:
        report = store.reclaim(Policy(retention_bytes=30 * FILE + 1))
        assert [a[2] for a in actions(report)] == ["retention-bytes"] * 10 + ["batch-limit"]
        report = store.reclaim(Policy(retention_bytes=30 * FILE + 1))
        assert [a[2] for a in actions(report)] == ["retention-bytes"] * 4 + ["not-expired"]
        assert "within --retention-bytes" in [d for d in report.decisions if d.kind == "commitlog"][-1].why
        assert len(store.commitlog_queue.files) == 30
        clock.now = local_ms(12)
        assert not store.reclaim(Policy(retention_bytes=FILE)).changed          # outside the window
        assert store.reclaim(Policy(retention_bytes=28 * FILE, ignore_window=True)).count("commitlog") == 2
    check_consistent(root)


# --------------------------------------------------------------------- staged deletion and undo

def sha_tree(root: Path) -> dict:
    """Content of every data file, and the mtime of commitlog and consume queue files (what their
    expiry reads); index files get their header rewritten by any store's close."""
    import hashlib

    return {str(p.relative_to(root)): (hashlib.sha256(p.read_bytes()).hexdigest(),
                                       None if kind == "index" else p.stat().st_mtime_ns)
            for kind in ("commitlog", "consumequeue", "index") for p in (root / kind).rglob("*") if p.is_file()}


def test_staged_files_leave_the_data_folders_and_go_once_due(store_copy):
    root = store_copy("multifile")
    clock = ManualClock(local_ms(4))
    age(root, clock.now, 100, 0, 25)
    age(root, clock.now, 1, 25)
    with open_store(root, clock=clock, deleteCommitLogFilesInterval=0, deleteConsumeQueueFilesInterval=0) as store:
        staged_at = clock.now
        report = store.reclaim(Policy(delete_delay_ms=60000, max_files=25))
        assert report.count("commitlog", {"stage"}) == 25
        assert report.count("consumequeue", {"stage"}) == 1        # AuditTopic/0's first file
        assert report.count("index", {"stage"}) >= 1
        manifest = json.loads((root / "trash" / "staged.json").read_text())["staged"]
        assert {e["path"] for e in manifest} == {d.file for d in report.decisions if d.action == "stage"}
        assert all(e["due_at"] == staged_at + 60000 for e in manifest)
        assert (root / "trash" / "commitlog" / f"{0:020d}").stat().st_size == FILE
        assert (root / "trash" / "consumequeue" / "AuditTopic" / "0" / f"{0:020d}").exists()
        clock.advance(59999)
        assert store.reclaim(Policy(delete_delay_ms=60000)).count(actions={"remove-staged"}) == 0
        clock.advance(1)
        later = store.reclaim(Policy(delete_delay_ms=60000))
        assert later.count(actions={"remove-staged"}) == len(manifest)
        assert all("its delete delay has passed" in d.why for d in later.decisions if d.kind == "trash")
    assert not (root / "trash").exists()
    assert check_consistent(root) == broker_units("multifile", 25 * FILE) == reopen_reads(root)


def test_undo_puts_every_staged_file_back_byte_for_byte(store_copy, run_cli):
    root = store_copy("multifile")
    clock = ManualClock(local_ms(4))
    age(root, clock.now, 100, 0, 30)
    age(root, clock.now, 1, 30)
    before = sha_tree(root)
    (info_before,) = run_cli("info", root, "--json").json_lines()
    with open_store(root, clock=clock) as store:
        for _ in range(3):                                  # three runs, ten files each
            store.reclaim(Policy(delete_delay_ms=3600000))
        assert store.commitlog_queue.min_offset == 30 * FILE
        check = store.undo_reclaim(dry_run=True)
        staged = json.loads((root / "trash" / "staged.json").read_text())["staged"]
        assert check.count(actions={"restore"}) == len(staged)
        assert store.commitlog_queue.min_offset == 30 * FILE                 # a dry undo changes nothing
        report = store.undo_reclaim()
        assert not report.incomplete and report.min_offset_after == 0
        assert store.commitlog_queue.min_offset == 0
        assert all(q.min_after == 0 for q in report.queues)
        # the store, still open, serves the restored messages again
        cq = store.dispatcher.queues[("AuditTopic", 0)]
        assert queue_min_offset(cq, 0) == 0 and cq.unit_at(0).commitlog_offset == 3620
    assert sha_tree(root) == before
    assert not (root / "trash").exists()
    (info_after,) = run_cli("info", root, "--json").json_lines()
    assert info_after["queues"] == info_before["queues"]
    assert check_consistent(root) == broker_units("multifile", 0)


def test_undo_never_leaves_a_hole(store_copy):
    root = store_copy("multifile")
    clock = ManualClock(local_ms(4))
    age(root, clock.now, 100, 0, 12)
    age(root, clock.now, 1, 12)
    with open_store(root, clock=clock) as store:
        store.reclaim(Policy(delete_delay_ms=3600000))      # files 0-9 staged for an hour
        store.reclaim(Policy(delete_delay_ms=0))            # files 10-11 deleted at once
        report = store.undo_reclaim()
        assert report.incomplete and report.count(actions={"restore"}) == 0
        assert "would leave a hole" in next(d.why for d in report.decisions if d.kind == "commitlog")
        assert store.commitlog_queue.min_offset == 12 * FILE
    assert (root / "trash" / "commitlog" / f"{0:020d}").exists()
    check_consistent(root)


# --------------------------------------------------------------------- referenced files

def test_a_referenced_file_is_shut_down_then_forced_after_destroyMapedFileIntervalForcibly(store_copy):
    root = store_copy("multifile")
    clock = ManualClock(local_ms(4))
    age(root, clock.now, 100, 0, 3)
    age(root, clock.now, 1, 3)
    with open_store(root, clock=clock) as store:
        first = store.commitlog_queue.files[0]
        assert first.hold()                                   # a reader
        report = store.reclaim()
        assert actions(report) == [(f"{0:020d}", "keep", "referenced")]   # no holes: the others wait
        assert "held by 1 reader(s)" in report.decisions[0].why
        assert any("destroyMapedFileIntervalForcibly" in w for w in report.warnings)
        assert not first.available and not first.hold()        # no new reader can take it
        assert (root / "commitlog" / f"{0:020d}").exists()
        clock.advance(60000)
        report = store.reclaim()
        assert actions(report)[0] == (f"{0:020d}", "keep", "referenced")
        clock.advance(60000)                                   # 120 s after the first attempt
        report = store.reclaim()
        assert actions(report)[:4] == [(f"{0:020d}", "delete", "hanged"), (f"{FILE:020d}", "delete", "expired"),
                                       (f"{2 * FILE:020d}", "delete", "expired"),
                                       (f"{3 * FILE:020d}", "keep", "not-expired")]
        first.release()                                        # the late reader lets go: nothing breaks
    check_consistent(root)


# --------------------------------------------------------------------- the store's own schedule

def test_the_store_reclaims_on_its_own_schedule(tmp_path):
    root = tmp_path / "store"
    clock = ManualClock(local_ms(4))
    config = fixture_config(root, cleanResourceInterval=3600000)
    with MessageStore(config, clock=clock, disk_usage=FixedDisk(0.2)) as store:
        for i in range(300):
            m = _msg(i)
            m.body = bytes(600)
            store.put(m)
        files = len(store.commitlog_queue.files)
        age(root, clock.now, 100, 0, files - 1)
        service = store.reclaim_service
        service.ran.clear()
        service.wakeup()                                      # instead of waiting cleanResourceInterval
        assert service.ran.wait(30) and service.last_error is None
        assert len(store.commitlog_queue.files) == 1
        assert store.reclaimer.last_report.count("commitlog", {"delete"}) == files - 1
    assert not (root / "trash").exists()                      # the broker's way: deleted at once


# --------------------------------------------------------------------- crashed and 5.x stores

def test_clean_recovers_a_crashed_store_first(store_copy, run_cli):
    root = store_copy("crash")
    now = datetime.now().timestamp() * 1000
    age(root, now, 100)
    result = run_cli("clean", root, "--now", "--delete-delay", "0", "--max-files", "5")
    assert result.code == 0, result.err
    assert "recovered the store first (abnormal recovery; it was not shut down cleanly)" in result.err
    assert commitlog_names(root)[0] == f"{5 * FILE:020d}"
    check_consistent(root, "crash")


def test_clean_on_a_5x_store(store_copy, run_cli):
    root = store_copy("basic5")
    result = run_cli("clean", root, "--now", "--force", "--json")
    assert result.code == 0, result.err
    lines = result.json_lines()
    assert [(l["action"], l["reason"]) for l in lines if l["type"] == "decision"] == [("keep", "active")]
    assert lines[-1]["type"] == "summary" and lines[-1]["changed"] is False


# --------------------------------------------------------------------- the command

def test_clean_is_quiet_when_there_is_nothing_to_do(store_copy, run_cli):
    root = store_copy("multifile")
    age(root, datetime.now().timestamp() * 1000, 1)     # written an hour ago (the fixture's own times age)
    result = run_cli("clean", root)
    assert (result.code, result.out, result.err) == (0, "", "")
    verbose = run_cli("clean", root, "--verbose")
    assert "KEEP" in verbose.out and "not expired" in verbose.out


def test_clean_stages_then_undo_restores_from_the_command_line(store_copy, run_cli):
    root = store_copy("multifile")
    now = datetime.now().timestamp() * 1000
    age(root, now, 100, 0, 4)
    age(root, now, 1, 4)
    before = sha_tree(root)
    result = run_cli("clean", root, "--now")
    assert result.code == 0, result.err
    assert result.out.count("STAGE    commitlog/") == 4
    assert "expired: last modified 100.0 h ago" in result.out
    assert "commitlog minimum offset 0 -> 262144" in result.out
    assert "there is no config/consumerOffset.json" in result.err
    assert sorted(p.name for p in (root / "trash" / "commitlog").iterdir()) == [f"{i * FILE:020d}" for i in range(4)]
    again = run_cli("clean", root, "--now")                 # not due yet, nothing more expired
    assert (again.code, again.out) == (0, "")
    undo = run_cli("clean", root, "--undo", "--json")
    assert undo.code == 0, undo.err
    summary = undo.json_lines()[-1]
    assert summary["restored"] == 4 + sum(1 for l in undo.json_lines() if l.get("kind") == "index"
                                          and l.get("action") == "restore")
    assert summary["commitlogMinOffset"] == {"before": 4 * FILE, "after": 0}
    assert sha_tree(root) == before


def test_dry_run_changes_nothing_and_prints_the_plan(store_copy, run_cli):
    from test_info_and_layout import age_times, snapshot

    root = store_copy("crash")
    now = datetime.now().timestamp() * 1000
    age(root, now, 1, 3)
    age(root, now, 100, 0, 3)
    age_times(root)                       # a kernel with relatime would update these on a read
    state = snapshot(root)
    result = run_cli("clean", root, "--now", "--dry-run")
    assert result.code == 0, result.err
    assert "dry run: nothing changed" in result.out and result.out.count("STAGE    commitlog/") == 3
    assert "KEEP     commitlog/00000000000000196608" in result.out
    assert "not shut down cleanly" in result.err
    assert snapshot(root) == state


def test_dry_run_reads_the_trash_manifest_without_touching_it(store_copy, run_cli):
    from test_info_and_layout import age_times, snapshot

    root = store_copy("multifile")
    now = datetime.now().timestamp() * 1000
    age(root, now, 100, 0, 2)
    assert run_cli("clean", root, "--now").code == 0          # stages two files: a manifest now
    age_times(root)
    state = snapshot(root)
    for args in (("--now", "--dry-run"), ("--undo", "--dry-run")):
        result = run_cli("clean", root, *args)
        assert result.code == 0, result.err
    assert snapshot(root) == state


@pytest.mark.parametrize("manifest", ["{not json", "[1, 2]", '{"staged": 5}', '{"staged": [{"path": 1}]}',
                                      '{"staged": [7]}'])
def test_a_damaged_trash_manifest_is_reported_never_overwritten(store_copy, run_cli, manifest):
    root = store_copy("multifile")
    now = datetime.now().timestamp() * 1000
    age(root, now, 100, 0, 2)
    assert run_cli("clean", root, "--now").code == 0
    staged = sorted(p.name for p in (root / "trash" / "commitlog").iterdir())
    (root / "trash" / "staged.json").write_text(manifest)
    for args in (("--now",), ("--undo",), ("--now", "--dry-run")):
        result = run_cli("clean", root, *args)
        assert result.code == 1 and "staged.json" in result.err and "manifest" in result.err, (args, result.err)
    assert (root / "trash" / "staged.json").read_text() == manifest
    assert sorted(p.name for p in (root / "trash" / "commitlog").iterdir()) == staged


def _immutable(path, on: bool) -> None:
    """chattr +i: even root can then neither rename nor delete the file (how the tests make the
    file system refuse)."""
    result = subprocess.run(["chattr", "+i" if on else "-i", str(path)], capture_output=True)
    if result.returncode != 0:
        pytest.skip(f"chattr is not available here: {result.stderr.decode().strip()}")


def test_a_file_the_file_system_refuses_is_kept_and_the_run_goes_on(store_copy, run_cli):
    root = store_copy("multifile")
    now = datetime.now().timestamp() * 1000
    age(root, now, 100, 0, 4)
    before = commitlog_names(root)
    closed = root / "trash" / "commitlog"          # nothing can be moved into it
    closed.mkdir(parents=True)
    _immutable(closed, True)
    try:
        result = run_cli("clean", root, "--now", "--json")
    finally:
        _immutable(closed, False)
    assert result.code == 1 and "could not be deleted or staged" in result.err
    decisions = [l for l in result.json_lines() if l["type"] == "decision" and l["kind"] == "commitlog"]
    assert (decisions[0]["action"], decisions[0]["reason"]) == ("keep", "failed")
    assert "could not be staged" in decisions[0]["why"]
    assert all(d["action"] != "stage" for d in decisions)            # none after it either: no hole
    assert result.json_lines()[-1]["type"] == "summary"              # the report is whole
    assert commitlog_names(root) == before
    assert run_cli("verify-crc", root).code == 0


def test_undo_stops_where_a_file_cannot_go_back_and_leaves_no_hole(store_copy, run_cli):
    root = store_copy("multifile")
    now = datetime.now().timestamp() * 1000
    age(root, now, 100, 0, 3)
    assert run_cli("clean", root, "--now").code == 0                  # stages files 0, 1, 2
    stuck = root / "trash" / "commitlog" / f"{FILE:020d}"
    _immutable(stuck, True)
    try:
        result = run_cli("clean", root, "--undo", "--json")
    finally:
        _immutable(stuck, False)
    assert result.code == 1
    names = commitlog_names(root)
    assert names[0] == f"{2 * FILE:020d}" and f"{0:020d}" not in names   # file 2 back, 1 stuck, 0 kept out
    assert result.json_lines()[-1]["commitlogMinOffset"]["after"] == 2 * FILE
    assert run_cli("verify-crc", root).code == 0


def test_dry_run_on_a_crashed_store_plans_what_the_real_run_does(store_copy, run_cli):
    """The real run recovers first (the pre-created file beyond the cut goes); the dry run
    plans on what the recovery leaves."""
    root = store_copy("crash")
    now = datetime.now().timestamp() * 1000
    age(root, now, 100)
    args = ("--now", "--retention-ms", "0", "--max-files", "100", "--json")

    def plan(*extra):
        result = run_cli("clean", root, *args, *extra)
        assert result.code == 0, result.err
        lines = result.json_lines()
        decided = sorted((l["file"], l["action"]) for l in lines if l["type"] == "decision")
        return decided, lines[-1]["messagesRemoved"]

    dry = plan("--dry-run")
    assert dry == plan()
    assert ("commitlog/00000000000002818048", "keep") in dry[0]


@pytest.mark.parametrize("name, text", [
    ("consumerOffset.json", '{"offsetTable":{"AuditTopic@g":{0:"x"}}}'),
    ("consumerOffset.json", '{"offsetTable":5}'),
    ("consumerOffset.json", '{"offsetTable":{"AuditTopic@g":{0:1e400}}}'),
    ("delayOffset.json", '{"offsetTable":{"x":1}}'),
])
def test_unreadable_offsets_files_are_warned_about(store_copy, run_cli, name, text):
    root = store_copy("multifile")
    now = datetime.now().timestamp() * 1000
    age(root, now, 100, 0, 3)
    (root / "config").mkdir(exist_ok=True)
    (root / "config" / name).write_text(text)
    result = run_cli("clean", root, "--now", "--dry-run")
    assert result.code == 0, result.err
    assert f"cannot read config/{name}" in result.err


def test_json_lines(store_copy, run_cli):
    root = store_copy("multifile")
    now = datetime.now().timestamp() * 1000
    age(root, now, 100, 0, 2)
    age(root, now, 1, 2)
    result = run_cli("clean", root, "--now", "--json", "--delete-delay", "0")
    assert result.code == 0, result.err
    lines = result.json_lines()
    decisions = [l for l in lines if l["type"] == "decision" and l["kind"] == "commitlog"]
    assert [(d["action"], d["reason"]) for d in decisions] == [("delete", "expired")] * 2 + [("keep", "not-expired")]
    assert set(decisions[0]) >= {"file", "why", "size", "startOffset", "lastModified", "ageHours"}
    queues = [l for l in lines if l["type"] == "queue"]
    assert queues and all(q["minOffsetAfter"] >= q["minOffsetBefore"] for q in queues)
    summary = lines[-1]
    assert summary["type"] == "summary" and summary["deleted"] == 2 and summary["changed"] is True
    assert summary["commitlogMinOffset"] == {"before": 0, "after": 2 * FILE}
    assert summary["messagesRemoved"] == sum(q["messagesRemoved"] for q in queues)
    assert summary["unreadMessagesRemoved"] is None


@pytest.mark.parametrize("args, code, text", [
    (("--undo", "--force"), 2, "--undo"),
    (("--retention-bytes", "lots"), 2, "--retention-bytes"),
    (("--delete-delay", "soon"), 2, "--delete-delay"),
    (("--set", "deleteWhen=4am"), 2, "deleteWhen"),
    (("--set", "deleteWhen=\u00b2"), 2, "deleteWhen"),      # a digit to str.isdigit, not to int()
    (("--set", "deleteWhen=25"), 2, "deleteWhen"),            # not an hour of the day
    (("--retention-ms", "-5"), 2, "--retention-ms"),
])
def test_usage_errors(store_copy, run_cli, args, code, text):
    result = run_cli("clean", store_copy("basic"), *args)
    assert result.code == code and text in result.err


def test_not_a_store_and_a_held_lock(tmp_path, store_copy, run_cli):
    assert run_cli("clean", tmp_path / "nothing").code == 4
    assert not (tmp_path / "nothing").exists()
    root = store_copy("basic")
    with MessageStore(fixture_config(root, "basic"), start_services=False):
        for args in ((), ("--dry-run",), ("--undo",)):
            result = run_cli("clean", root, *args)
            assert result.code == 3 and "lock" in result.err


# --------------------------------------------------------------------- examples/

def test_the_example_wrapper_is_quiet_logs_and_passes_the_exit_code_through(store_copy, tmp_path):
    root = store_copy("multifile")
    script = REPO / "examples" / "mqtool-clean.sh"
    log = tmp_path / "clean.log"
    env = {"PATH": "/usr/bin:/bin", "MQTOOL": str(Path(sys.executable).parent / "mqtool"),
           "MQTOOL_CLEAN_LOG": str(log), "HOME": str(tmp_path)}

    def run(*args):
        return subprocess.run(["/bin/sh", str(script), str(root), *args], capture_output=True, text=True, env=env)

    # the fixture's files are days old: in the deleteWhen hour (04 by default) a clean is due, so the
    # quiet run names another hour
    quiet = run("--set", f"deleteWhen={(datetime.now().hour + 12) % 24:02d}")
    assert (quiet.returncode, quiet.stdout, quiet.stderr) == (0, "", "")
    assert "exit 0" in log.read_text()
    now = datetime.now().timestamp() * 1000
    age(root, now, 100, 0, 2)
    news = run("--now")
    assert news.returncode == 0 and "STAGE" in news.stdout
    assert "STAGE" in log.read_text()
    with MessageStore(fixture_config(root), start_services=False):
        held = run()
    assert (held.returncode, held.stdout) == (3, "")
    assert "lock" in log.read_text().splitlines()[-1] or "lock" in log.read_text()
    cron = (REPO / "examples" / "clean.cron").read_text()
    assert "mqtool-clean.sh" in cron and any(l.split()[:5] for l in cron.splitlines() if l and l[0].isdigit())
    assert shutil.which("sh")


# --------------------------------------------------------------------- small pieces

def test_queue_min_offset_is_correctMinOffset(extracted):
    """Bisection agrees with a walk over the units for every boundary the commitlog can have."""
    root = extracted("multifile")
    layout = discover(fixture_config(root, "multifile"), config_given=True)
    for cq in consumequeue.open_all(layout):
        try:
            units = [(u.queue_offset, u.commitlog_offset) for u in cq.units()]
            for phy_min in [0, 1] + [i * FILE for i in range(1, 46)]:
                expected = next((q for q, off in units if off >= phy_min), cq.max_offset())
                assert queue_min_offset(cq, phy_min) == expected, (cq.topic, cq.queue_id, phy_min)
        finally:
            cq.close()


def test_retention_options_precedence_and_sizes(store_copy, run_cli):
    from mqtool.commands.clean import parse_duration, parse_size, retention_ms

    assert retention_ms(5, 7, 9) == 5 and retention_ms(None, 7, 9) == 7 * 60000
    assert retention_ms(None, None, 9) == 9 * HOUR and retention_ms(None, None, None) is None
    assert retention_ms(-1, None, None) == -1
    assert parse_size("1073741824", "x") == 1 << 30 and parse_size("10G", "x") == 10 << 30
    assert parse_size("512MiB", "x") == 512 << 20 and parse_size("1.5k", "x") == 1536
    assert parse_duration("60", "x") == parse_duration("60s", "x") == parse_duration("1m", "x") == 60000
    assert parse_duration("0", "x") == 0 and parse_duration("250ms", "x") == 250
    root = store_copy("multifile")
    now = datetime.now().timestamp() * 1000
    age(root, now, 3)
    # --retention-minutes 600 (10 h) would keep everything; the more precise --retention-ms wins
    result = run_cli("clean", root, "--now", "--retention-hours", "1", "--retention-minutes", "600",
                     "--retention-ms", str(2 * HOUR), "--max-files", "2", "--delete-delay", "0", "--json")
    assert result.code == 0, result.err
    decisions = [l for l in result.json_lines() if l["type"] == "decision" and l["kind"] == "commitlog"]
    assert [(d["action"], d["reason"]) for d in decisions] == [("delete", "expired")] * 2 + [("keep", "batch-limit")]
    assert "--retention 2.0 h" in decisions[0]["why"]
