"""A store at a glance: what `mqtool info` reports, gathered without changing anything."""

from __future__ import annotations

from mqtool.errors import MqError
from mqtool.formats import markers
from mqtool.formats.commitlog import BLANK_HEADER_SIZE, Blank, Record, RecordError, decode_entry
from mqtool.formats.filenames import is_index_name, is_offset_name
from mqtool.formats.written import written_end
from mqtool.storage import batchqueue, census, commitlog, consumequeue, dledger, fsutil, metafiles, timerstore
from mqtool.storage.commitlog import Problem
from mqtool.storage.consumequeue import queue_min_offset
from mqtool.storage.indexfile import IndexFile
from mqtool.storage.layout import is_new_store
from mqtool.storage.settings import iso  # noqa: F401 - the one time format, by its name here too


COMPILED_FROM = 32 << 20   # bytes to walk from which loading the compiled walk costs less than the walk
DLEDGER_COMPILED_FROM = 2 << 20   # the same for DLedger entries, whose reference walk is ~10x slower a record


def commitlog_extent(layout, queue=None, ledger: list | None = None) -> dict:
    """Min and max commitlog offsets: the first file's start, and where the broker's recovery ends
    the data (engine.recovery.walk_for_recovery from the third-last file, checkCRCOnRecover as
    configured: never more than three files, by the compiled walk from COMPILED_FROM bytes on);
    what lies past that end (_past_the_end).  ledger: a DLedger store's LedgerCut (the walk's) is
    appended to it."""
    from mqtool.engine import recovery   # at use: the compiled walk and its kernels

    own = queue is None
    queue = queue or commitlog.open_queue(layout)
    try:
        files = queue.files
        if not files:
            return {"minOffset": 0, "maxOffset": 0, "files": 0}
        # what recover walks: on a store switched to DLedger, DLedger's files once it has any
        part = dledger.recovered_part(queue)
        start = max(len(part.files) - 3, 0)
        walked = sum(min(mf.file_size, mf.data_end) for mf in part.files[start:])
        last_stored: list = []
        compiled_from = DLEDGER_COMPILED_FROM if layout.is_dledger() else COMPILED_FROM
        cut, data_end, stop, _ = recovery.walk_for_recovery(part, start, layout.config.checkCRCOnRecover,
                                                            last_stored=last_stored, compiled=walked >= compiled_from,
                                                            ledger=ledger)
        return {"minOffset": files[0].file_from_offset, "maxOffset": cut, "files": len(files),
                "firstStoreTimestamp": _first_store_time(files[0], len(files) == 1),
                "lastStoreTimestamp": last_stored[-1] if last_stored else None,
                **_past_the_end(queue, cut, data_end, stop, fsutil.relative_paths(layout.root))}
    finally:
        if own:
            queue.close()


def _past_the_end(queue, cut: int, data_end: int, stop, display) -> dict:
    """problemsInLastFile (1 or 0) and firstProblemInLastFile (what, where): written bytes past
    where the broker's recovery ends the data, which it would cut (a record that is not valid,
    garbage after the last one, a later file holding data)."""
    found = None
    if stop is not None:
        mf = queue.find_by_offset(stop.offset)
        for entry in commitlog.walk_file(mf, start=stop.file_offset, check_crc=False, is_last=True):
            if isinstance(entry, Problem):     # the walker's own account (a file cut inside a record...)
                stop = entry
            break
        found = f"{display(stop.path)} at byte {stop.file_offset}: {stop.message}"
    elif data_end > cut and not _blank_at(queue, cut, data_end):
        mf = queue.find_by_offset(cut)
        found = (f"{display(mf.path)} at byte {cut - mf.file_from_offset}: {data_end - cut:,} written bytes "
                 "after the end of the data")
    else:
        later = [mf for mf in queue.files if mf.file_from_offset > cut
                 and written_end(mf.buf, 0, min(mf.file_size, mf.data_end)) > 0]
        if later:
            found = f"{display(later[0].path)}: holds data, but the data ends before it, at {cut}"
    return {"problemsInLastFile": int(found is not None), "firstProblemInLastFile": found}


def _blank_at(queue, cut: int, data_end: int) -> bool:
    """Whether the written bytes from cut to data_end are a BLANK record's header (a last file
    that ends in one: the broker's recovery ends the data before it, and the next record goes
    into a new file)."""
    mf = queue.find_by_offset(cut)
    if mf is None or data_end - cut > BLANK_HEADER_SIZE:
        return False
    try:
        return isinstance(decode_entry(mf.buf, cut - mf.file_from_offset, mf.file_size, mf.file_from_offset), Blank)
    except RecordError:
        return False


def _first_store_time(mf, is_last: bool) -> int | None:
    """The store time of the file's first record (None when it holds none)."""
    for entry in commitlog.walk_file(mf, check_crc=False, is_last=is_last):
        if isinstance(entry, Record):
            return entry.store_timestamp
    return None


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
    info["commitlog"] = _kind_summary(cl_files, layout.commitlog_file_size(), fsutil.relative_paths(layout.root))
    info["commitlog"]["dirs"] = [str(d) for d in layout.commitlog_dirs + layout.readonly_commitlog_dirs]
    walked: list = []    # a DLedger store's entries as the extent's walk found them (recovery.LedgerCut)
    info["commitlog"].update(commitlog_extent(layout, ledger=walked))
    if layout.is_dledger():
        with commitlog.open_queue(layout) as queue:
            info["dledger"] = dledger.read_ledger(layout, queue, end=walked[0].end if walked else None).to_json()
            info["division"] = commitlog.describe_division(queue, dledger.switch_pending(layout, queue))
            info["movedByHand"] = [str(p) for p in dledger.moved_files(layout)]

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
    info["consumequeue"] = _kind_summary(cq_files, layout.consume_queue_file_size(), fsutil.relative_paths(layout.root))
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
        problems.append(info["commitlog"]["firstProblemInLastFile"] + "; `mqtool verify-crc` checks it all")
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
