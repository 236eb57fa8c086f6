"""A store at a glance: what `mqtool info` reports, gathered without changing anything."""

from __future__ import annotations

from mqtool.errors import MqError
from mqtool.forensics.dumpwalk import relative_paths
from mqtool.formats import markers
from mqtool.formats.commitlog import Blank, Record
from mqtool.formats.filenames import is_index_name, is_offset_name
from mqtool.storage import batchqueue, census, commitlog, consumequeue, dledger, fsutil, metafiles, timerstore
from mqtool.storage.commitlog import EndOfData, Problem
from mqtool.storage.consumequeue import queue_min_offset
from mqtool.storage.indexfile import IndexFile
from mqtool.storage.layout import is_new_store
from mqtool.storage.settings import iso  # noqa: F401 - the one time format, by its name here too


def commitlog_extent(layout, queue=None) -> dict:
    """Min and max commitlog offsets: the first file's start and the end of the written data,
    found by walking the last file that holds data (no CRC check: a glance, not a verify)."""
    own = queue is None
    queue = queue or commitlog.open_queue(layout)
    try:
        files = queue.files
        if not files:
            return {"minOffset": 0, "maxOffset": 0, "files": 0}
        max_offset = files[0].file_from_offset
        first_time = last_time = None
        problems, first_problem = 0, None
        for mf in reversed(files):
            end = None
            # is_last: every later file was walked and holds no data (a crash leaves empty ones)
            for entry in commitlog.walk_file(mf, check_crc=False, is_last=True):
                if isinstance(entry, Record):
                    end = entry.offset + entry.total_size
                    last_time = entry.store_timestamp
                elif isinstance(entry, Blank):
                    end = entry.offset + entry.total_size
                elif isinstance(entry, EndOfData):
                    end = max(end or 0, entry.offset)
                elif isinstance(entry, Problem):
                    problems += 1
                    if first_problem is None:
                        first_problem = (f"{relative_paths(layout.root)(entry.path)} at byte {entry.file_offset}: "
                                         f"{entry.message}")
            if end is not None and end > mf.file_from_offset:
                max_offset = end
                break
        for entry in commitlog.walk_file(files[0], check_crc=False, is_last=len(files) == 1):
            if isinstance(entry, Record):
                first_time = entry.store_timestamp
                break
        return {"minOffset": files[0].file_from_offset, "maxOffset": max_offset, "files": len(files),
                "firstStoreTimestamp": first_time, "lastStoreTimestamp": last_time,
                "problemsInLastFile": problems, "firstProblemInLastFile": first_problem}
    finally:
        if own:
            queue.close()


def _kind_summary(files, expected_size=None, display=str) -> dict:
    total = sum(f.size for f in files)
    out = {"files": len(files), "bytes": total}
    if expected_size is not None:    # oddFiles: their paths (display: as the store's root shows them)
        odd = [display(f.path) for f in files if f.size != expected_size or not is_offset_name(f.name)]
        if odd:
            out["oddFiles"] = odd
        out["fileSize"] = expected_size
    return out


def timer_summary(layout) -> dict | None:
    """The 5.x timer store at a glance: its files and the pending timer messages per real topic
    (None without one)."""
    if not timerstore.exists(layout):
        return None
    from mqtool.storage import timerview   # numpy's: only for a store that has a timer store

    queue = commitlog.open_queue(layout)
    try:
        counts = timerview.pending_counts(layout, queue)
    finally:
        queue.close()
    counts["timerlogFiles"] = len(layout.timerlog_files())
    counts["precisionMs"] = layout.timer_precision_ms()
    return counts


def batch_queues(layout, phy_min_offset: int) -> list[dict]:
    """The batch consume queues (BatchCQ topics) as the broker reports them: offsets in messages
    (an inner batch's unit counts its batchSize), min as correctMinOffset leaves it."""
    out = []
    for bq in batchqueue.open_all(layout):
        try:
            out.append({"topic": bq.topic, "queueId": bq.queue_id, "files": len(bq.files.files),
                        "minOffset": batchqueue.min_offset(bq, phy_min_offset),
                        "maxOffset": batchqueue.max_offset(bq), "cqType": "BatchCQ"})
        finally:
            bq.close()
    return sorted(out, key=lambda q: (q["topic"], q["queueId"]))


def gather(layout) -> dict:
    """Everything `info` shows, as a JSON-ready dict."""
    info: dict = {"type": "info", "store": str(layout.root)}
    found = census.take(layout)
    info["census"] = [e.to_json() for e in found.entries]
    info["links"] = [link.to_json() for link in found.links]
    info["features"] = sorted(found.features - {"store", "mqtool", "config"})
    info["unchecked"] = unchecked(found)
    cl_files = layout.commitlog_files()
    info["commitlog"] = _kind_summary(cl_files, layout.commitlog_file_size(), relative_paths(layout.root))
    info["commitlog"]["dirs"] = [str(d) for d in layout.commitlog_dirs + layout.readonly_commitlog_dirs]
    info["commitlog"].update(commitlog_extent(layout))
    if layout.is_dledger():
        with commitlog.open_queue(layout) as queue:
            info["dledger"] = dledger.read_ledger(layout, queue).to_json()
            info["division"] = commitlog.describe_division(queue, dledger.switch_pending(layout, queue))
            info["movedByHand"] = [str(p) for p in dledger.moved_files(queue)]

    queues = []
    cq_files = []
    for cq in consumequeue.open_all(layout):
        try:
            files = layout.consume_queue_files(cq.directory)
            cq_files.extend(files)
            # the broker's min offset: the first unit at or above the commitlog's min offset
            # (ConsumeQueue.correctMinOffset), which after a clean may lie inside the first file
            queues.append({"topic": cq.topic, "queueId": cq.queue_id, "files": len(files),
                           "minOffset": queue_min_offset(cq, info["commitlog"]["minOffset"]),
                           "maxOffset": cq.max_offset(), "cqType": "SimpleCQ"})
        finally:
            cq.close()
    queues.extend(batch_queues(layout, info["commitlog"]["minOffset"]))
    info["consumequeue"] = _kind_summary(cq_files, layout.consume_queue_file_size(), relative_paths(layout.root))
    simple = [q for q in queues if q["cqType"] == "SimpleCQ"]
    info["consumequeue"]["queues"] = len(simple)
    info["consumequeue"]["topics"] = len({q["topic"] for q in simple})
    batch = [q for q in queues if q["cqType"] == "BatchCQ"]
    info["batchconsumequeue"] = {"files": sum(q["files"] for q in batch), "queues": len(batch),
                                 "topics": len({q["topic"] for q in batch})}
    info["queues"] = queues

    idx_files = layout.index_files()
    slots, entries = layout.index_geometry()
    info["index"] = _kind_summary(idx_files)
    info["index"].update({"maxHashSlotNum": slots, "maxIndexNum": entries})
    headers = []
    named = [f for f in idx_files if is_index_name(f.name)]
    for f in idx_files:
        if not is_index_name(f.name):
            headers.append({"name": f.name, "size": f.size, "error": "not an index file name"})
            continue
        try:
            ix = IndexFile(f.path, slots, entries)
        except MqError as exc:
            headers.append({"name": f.name, "size": f.size, "error": exc.message})
            continue
        try:
            header = {"name": f.name, "size": f.size, **ix.header().to_json()}
            damage = [f"at byte {where}: {what} (expected {expected}, found {found})"
                      for where, what, expected, found in ix.header_problems(newest=f is named[-1])]
            if not ix.size_ok:
                damage.insert(0, f"is {ix.size} bytes, expected {ix.expected_size}")
            if damage:
                header["headerProblems"] = damage
            headers.append(header)
        finally:
            ix.close()
    info["indexFiles"] = headers

    try:
        info["checkpoint"] = metafiles.read_checkpoint(layout.checkpoint_path)
    except MqError as exc:
        info["checkpoint"] = {"error": str(exc)}
    info["newStore"] = is_new_store(layout.root)
    abort_exists = layout.abort_path.exists()
    info["abort"] = {"exists": abort_exists}
    if abort_exists:
        info["abort"]["pid"] = markers.parse_abort(fsutil.read_small(layout.abort_path, 64))
    info["cleanShutdown"] = not abort_exists
    held = layout.in_use()
    info["lock"] = {"exists": layout.lock_path.exists(), "heldBy": held and held["pid"], "held": held is not None,
                    "command": held and held["command"], "holder": held and held["holder"]}
    configs = {}
    for name in ("topics.json", "consumerOffset.json", "delayOffset.json", "subscriptionGroup.json"):
        try:
            doc, read, note = metafiles.load_config_json(layout.config_dir / name)
            configs[name] = {"exists": (layout.config_dir / name).exists(), "read": read.name if read else None}
            if note:
                configs[name]["note"] = note
        except MqError as exc:
            configs[name] = {"exists": True, "read": None, "error": str(exc)}
    info["configFiles"] = configs
    info["timer"] = timer_summary(layout)
    info["format"] = guess_format(layout, info)
    info["problems"] = problems_shown(info) + found.problems()
    return info


def division_text(division: dict) -> str:
    """One line on a store switched to DLedger mode (commitlog.describe_division)."""
    blank = division["blank"]
    old_end = (f"its records end at {division['oldDataEnd']} with the BLANK the switch wrote ({blank['size']} bytes"
               + ("" if blank["reachesFileEnd"] else ", NOT reaching the file's end") + ")" if blank else
               f"its data ends at {division['oldDataEnd']} WITHOUT the BLANK the switch writes")
    if division["pending"]:
        return (f"DLedger has no data yet: a broker's next start in DLedger mode recovers the old commitlog "
                f"({division['oldFiles']} file(s), data to {division['oldDataEnd']}), writes a BLANK at its end and "
                f"divides at {division['dividedCommitlogOffset']}")
    where = "the old last file's end" if division["atOldEnd"] else "NOT the old last file's end"
    return (f"old commitlog below dividedCommitlogOffset {division['dividedCommitlogOffset']} ({where}): "
            f"{division['oldFiles']} file(s) from {division['oldMinOffset']}, {old_end}; DLedger entries above, "
            f"{division['dledgerFiles']} data file(s) ({division['setting']})")


def unchecked(found) -> list[str]:
    """What mqtool reads of this store only in part, one line per feature, naming its files."""
    out = []
    for name in sorted(found.features):
        feature = census.FEATURES[name]
        if feature.status != census.READ_ONLY or name == "config":
            continue
        where = (", ".join(e.path for e in found.entries if e.feature == name) or found.declared.get(name)
                 or "the broker's settings")
        refused = [w for w in census.WRITERS if w not in feature.kept_by]
        out.append(f"{name} ({feature.setting}: {where}): shown, not checked"
                   + (f"; refused by {', '.join(refused)}" if refused else ""))
    return out


def problems_shown(info: dict) -> list[str]:
    """What gather() saw wrong, one line each (info exits 1 when there is any)."""
    problems = []
    for kind in ("commitlog", "consumequeue"):
        for path in info[kind].get("oddFiles") or []:
            problems.append(f"{path}: unexpected size or name (a {kind} file is {info[kind]['fileSize']:,} bytes, "
                            "named by the offset it starts at)")
    if info["commitlog"].get("firstProblemInLastFile"):    # where the data ends: damage there is not the end
        more = info["commitlog"]["problemsInLastFile"] - 1
        problems.append(info["commitlog"]["firstProblemInLastFile"]
                        + (f" (and {more} more in that file)" if more else "") + "; `mqtool verify-crc` checks it all")
    for header in info["indexFiles"]:
        if "error" in header:
            problems.append(f"index/{header['name']}: {header['error']}")
        for what in header.get("headerProblems", []):
            problems.append(f"index/{header['name']} {what}")
    for path in info.get("movedByHand") or []:
        problems.append(f"{path}: {dledger.MOVED_BY_HAND}")
    if "error" in info["checkpoint"] and not info["newStore"]:   # a new store has no checkpoint yet
        problems.append(info["checkpoint"]["error"])   # it names the file
    for config in info["configFiles"].values():
        if "error" in config:
            problems.append(config["error"])   # it names the file
    return problems


def guess_format(layout, info) -> str:
    """4.x or 5.x, from what 5.x leaves behind (abort.bak, compaction/, 5-long checkpoint)."""
    if (layout.root / "abort.bak").exists() or (layout.root / "compaction").is_dir():
        return "5.x"
    cp = info.get("checkpoint") or {}
    if cp.get("masterFlushedOffset") or cp.get("confirmPhyOffset"):
        return "5.x"
    return "4.x"
