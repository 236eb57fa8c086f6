"""What `mqtool report` shows, gathered from the other commands' own code (nothing read twice a
second way): stats' pass over the commitlog (messages and bytes per hour per topic, the size
histogram, where the damage is), `lag` (forensics/lag.py), the timer store's pending units, a dry
run of `recover` (the store engine's recovery plan) and of `clean` (the reclaim rules, with who
loses unread messages), the trash and the quarantine.  A JSON-ready dict; the page is the command
line's to draw.
"""

from __future__ import annotations

import functools
import os
import time
from pathlib import Path

from mqtool.errors import MqError, RefusedError
from mqtool.forensics import lag as lagmod
from mqtool.forensics import storeinfo
from mqtool.pipeline import plan, storestats
from mqtool.pipeline.local import LocalEngine
from mqtool.storage import commitlog, fsutil, timerstore, timerview
from mqtool.storage.layout import QUARANTINE_DIR, discover
from mqtool.storage.settings import store_config_for_write

HOUR_MS = storestats.HOUR_MS


def gather(store, config_path=None, settings=(), *, jobs: int = 1, now_ms: int | None = None) -> dict:
    started = time.perf_counter()
    now_ms = now_ms if now_ms is not None else int(time.time() * 1000)
    found = plan.find_stores([store], config_path, settings)[0]
    layout = found.layout()
    # problems: what could not be read or planned; notes: what is not shown, and why
    data: dict = {"store": str(layout.root), "generatedAt": now_ms, "problems": [], "notes": []}

    runner = LocalEngine(jobs)
    storestats.warm_up()
    scan = functools.partial(storestats.scan, filters=None, check_crc=True)
    stats = storestats.merge(runner.imap(scan, plan.commitlog_parts([found])))
    data["stats"] = _stats(stats)
    data["commitlog"] = _commitlog(layout, stats)
    # recover and clean plan with the configuration their own runs use (file sizes read off the files)
    config = store_config_for_write(store, config_path, settings)
    data["recover"] = _recover(layout, config, data)
    data["clean"] = _clean(discover(config, config_given=True, must_exist=True), config, data)
    data["trash"], data["quarantine"] = _trash(layout), _quarantine(layout)
    data["lag"] = _lag(layout, data["problems"], data["notes"])
    data["timer"] = _timer(layout)
    data["flows"] = _flows(data["stats"])
    data["transactions"] = _transactions(layout, now_ms, data["problems"])
    data["seconds"] = round(time.perf_counter() - started, 3)
    return data


def _stats(stats) -> dict:
    topics: dict = {}
    sizes: dict = {}
    for (_, topic, _), agg in stats.queues.items():
        t = topics.setdefault(topic, {"messages": 0, "bytes": 0, "hours": {}, "hourBytes": {}})
        t["messages"] += agg.messages
        t["bytes"] += agg.bytes
        for hour, n in agg.hours.items():
            t["hours"][hour] = t["hours"].get(hour, 0) + n
        for hour, n in agg.hour_bytes.items():
            t["hourBytes"][hour] = t["hourBytes"].get(hour, 0) + n
        for bucket, n in agg.sizes.items():
            sizes[bucket] = sizes.get(bucket, 0) + n
    store = next(iter(stats.stores.values()), storestats.StoreAgg(""))
    return {"topics": dict(sorted(topics.items())), "sizeHistogram": dict(sorted(sizes.items())),
            "records": store.records, "damagedRecords": store.damaged_records, "problems": store.problems,
            "problemKinds": dict(sorted(store.kinds.items())),
            "damage": [{"offset": o, "bytes": n, "kind": k} for o, n, k in store.damage]}


def _commitlog(layout, stats) -> dict:
    files = [{"name": f.name, "start": int(f.name) if f.name.isdigit() else None, "size": f.size,
              "mtime": int(f.mtime * 1000)} for f in layout.commitlog_files()]
    return {"files": files, "fileSize": layout.commitlog_file_size(),
            "minOffset": files[0]["start"] if files else 0,
            "end": max((f["start"] + f["size"] for f in files if f["start"] is not None), default=0)}


def _recover(layout, config, data) -> dict | None:
    """What `recover` would do now: the store engine's plan, changing nothing (None while a process
    holds the lock: then it is the broker's to recover)."""
    from mqtool.engine.store import MessageStore

    if layout.is_locked() is not None:
        data["notes"].append("a process holds the store's lock: recover's plan is not shown (a running broker "
                             "recovers its store itself)")
        return None
    try:    # a dry run plans and leaves the store closed again, as `recover --dry-run` does
        plan = MessageStore(config, writer="recover", start_services=False).open(dry_run=True).recovery_plan
    except RefusedError as exc:     # a feature recover does not keep: it would refuse, so there is no plan
        data["notes"].append(f"recover's plan is not shown: {exc}")
        return None
    except MqError as exc:
        data["problems"].append(f"recover's plan: {exc}")
        return None
    if plan is None:
        return None
    return {"mode": plan.mode, "cut": plan.cut, "dataEnd": plan.data_end,
            "removedFiles": [Path(p).name for p in plan.removed_files],
            "queueCuts": len(plan.queue_cuts), "changesAnything": plan.changes_anything,
            "stop": plan.stop.to_json() if plan.stop is not None else None}


def _clean(layout, config, data) -> dict | None:
    """The next `clean --now` with the store's settings, planned as `clean --dry-run` plans it
    (engine.store.reclaim_dry_run: on a crashed store, on what its recovery leaves): what it
    deletes and whom it costs unread messages; the disk against the broker's levels."""
    from mqtool.engine import reclaim
    from mqtool.engine.clock import SystemClock
    from mqtool.engine.diskusage import DiskUsage
    from mqtool.engine.store import reclaim_dry_run

    try:
        report = reclaim_dry_run(config, layout, reclaim.Policy(dry_run=True, ignore_window=True), undo=False,
                                 clock=SystemClock(), disk_usage=DiskUsage())
    except RefusedError as exc:     # clean --dry-run would refuse too (a process holds the store)
        data["notes"].append(f"clean's plan is not shown: {exc}")
        return None
    except MqError as exc:
        data["problems"].append(f"clean's plan: {exc}")
        return None
    gone = [d for d in report.decisions if d.action != reclaim.KEEP]
    losses: dict = {}
    for loss in report.losses:
        losses[loss.group] = losses.get(loss.group, 0) + loss.unread
    return {"disk": report.disk.to_json(), "levels": {"diskMaxUsedSpaceRatio": report.levels.max_used,
                                                      "diskSpaceCleanForciblyRatio": report.levels.force,
                                                      "diskSpaceWarningLevelRatio": report.levels.warning},
            "deleteWhen": report.delete_when,
            "decisions": [{**d.to_json(), "startOffset": d.details.get("startOffset")} for d in gone],
            "kept": next(({"file": d.file, "why": d.why} for d in report.decisions
                          if d.kind == "commitlog" and d.action == reclaim.KEEP), None),
            "freedBytes": sum(d.size for d in gone), "messagesRemoved": report.messages_removed,
            "unreadRemoved": report.unread_removed, "lossesByGroup": dict(sorted(losses.items())),
            "warnings": report.warnings}


def _trash(layout) -> list[dict]:
    from mqtool.engine.trash import Trash

    try:
        entries = Trash(layout.root).entries
    except MqError:
        return []
    return [{"path": e.path, "kind": e.kind, "size": e.size, "startOffset": e.start_offset, "stagedAt": e.staged_at,
             "dueAt": e.due_at, "reason": e.reason} for e in entries]


def _quarantine(layout) -> list[dict]:
    """Each run kept in STORE/quarantine/ (by recover, and writers recovering first): its files and
    bytes, and the commitlog ranges its manifest lists (offsets, for the map)."""
    import json

    root = layout.root / QUARANTINE_DIR
    if not root.is_dir():
        return []
    out = []
    for name, _, is_dir, _ in sorted(fsutil.scandir(root)):
        if not is_dir:
            continue
        files, size = fsutil.tree_size(root / name)
        ranges = []
        try:
            manifest = json.loads(fsutil.read_whole(root / name / "manifest.json", 64 << 20))
            for entry in manifest.get("entries") or []:
                source = Path(str(entry.get("source", "")))
                if source.parent.name != "commitlog" or not source.name.isdigit():
                    continue
                if entry.get("kind") == "range":
                    start, end = int(entry["start"]), int(entry["end"])
                else:
                    start, end = 0, os.lstat(root / name / str(entry.get("saved", ""))).st_size
                ranges.append({"offset": int(source.name) + start, "bytes": end - start,
                               "reason": str(entry.get("reason", ""))})
        except (OSError, ValueError, TypeError, KeyError, AttributeError):
            pass     # a run without a readable manifest: its files and bytes are still shown
        out.append({"name": name, "files": files, "bytes": size, "commitlogRanges": ranges})
    return out


def _lag(layout, problems, notes) -> dict:
    try:
        report = lagmod.compute(layout)
    except MqError as exc:
        problems.append(f"lag: {exc}")
        return {"groups": [], "delays": [], "problems": []}
    notes.extend(report.notes)     # no offsets file: nobody has consumed yet, not damage
    return {"groups": [g.to_json() for g in report.groups()], "delays": [d.to_json() for d in report.delays],
            "problems": report.problems}


def _timer(layout) -> dict | None:
    """The timer store's messages to deliver by the hour they are due (None without a timer
    store), counted as info, stats and dump count them (timerview.summary)."""
    if not timerstore.exists(layout) or layout.is_dledger():
        return None
    queue = commitlog.open_queue(layout)
    try:
        with timerview.open_view(layout, queue) as view:
            pending = view.pending(want_units=True)      # one walk of the wheel and the timerlog for both
            counts = timerview.summary(view, pending)
            hours = timerview.deliverable_by_hour(pending, HOUR_MS)
    finally:
        queue.close()
    return {"byHour": hours, "pending": counts["pending"], "deliverable": counts["deliverable"],
            "recalled": counts["recalled"], "lastReadTimeMs": counts["lastReadTimeMs"],
            "lastReadTime": storeinfo.iso(counts["lastReadTimeMs"])}


def _flows(stats: dict) -> list[dict]:
    """Where messages go: per consumer group, its retries and dead letters per hour (stats' own
    group lines, from the %RETRY% and %DLQ% topics)."""
    topics = [{"broker": "", "topic": name, "messages": t["messages"], "messagesPerHour": t["hours"]}
              for name, t in stats["topics"].items()]
    return storestats.group_lines(topics)


def _transactions(layout, now_ms: int, problems: list) -> dict | None:
    """`mqtool transactions`' answer (None when the store has no transaction half queue)."""
    from mqtool.forensics.lookup import StoreReader
    from mqtool.forensics.transactions import PENDING, list_transactions, queue_ids, stuck_text
    from mqtool.formats.topicnames import TRANS_HALF_TOPIC

    if not queue_ids(layout, TRANS_HALF_TOPIC):
        return None
    try:
        with StoreReader(layout) as reader:
            report = list_transactions(reader, layout, now_ms)
    except MqError as exc:
        problems.append(f"transactions: {exc}")
        return None
    problems.extend(f"transactions: {p.path}: {p.message}" for p in report.problems)
    problems.extend(f"{stuck_text(t)}: stuck" for t in report.stuck)
    return {"summary": report.summary(), "byTopic": report.by_topic(), "checks": [c.to_json() for c in report.checks],
            "open": [t.to_json() for t in report.transactions if t.state == PENDING or t.op_missing]}
