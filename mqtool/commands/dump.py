"""`mqtool dump STORE KIND` / `mqtool dump FILE`: the files as they are on disk.

dump shows every entry it finds, including what a broker's recovery would
drop, and marks each entry that fails a check.  Exit 1 when anything failed.
"""

from __future__ import annotations

from pathlib import Path

import click

from rich.markup import escape

from mqtool import commitlog, consumequeue, dispatchrequest, metafiles, options, output, storeinfo
from mqtool.commitlog import EndOfData, Problem
from mqtool.errors import NotAStoreError, ProblemsFound, UsageError
from mqtool.formats import index as index_format
from mqtool.formats.commitlog import Blank, Record
from mqtool.formats.consumequeue import is_valid_unit
from mqtool.formats.filenames import is_index_name, is_offset_name
from mqtool.indexfile import IndexFile
from mqtool.mappedfilequeue import MappedFileQueue
from mqtool.messageview import BODY_FORMATS, message_fields

KINDS = ("commitlog", "consumequeue", "index", "checkpoint", "config")
BODY_CUT = 48
PROGRESS_STEP = 1 << 20  # bytes of commitlog between progress-bar updates


class Filters:
    def __init__(self, topics, queues, offset_from, offset_to, queue_offset_from, queue_offset_to,
                 since, until, limit):
        self.topics = set(topics) if topics else None
        self.queues = set(queues) if queues else None
        self.offset_from = offset_from
        self.offset_to = offset_to
        self.queue_offset_from = queue_offset_from
        self.queue_offset_to = queue_offset_to
        self.since = options.parse_time(since, "--since")
        self.until = options.parse_time(until, "--until")
        self.limit = limit
        self.shown = 0

    def offset_ok(self, offset: int) -> bool:
        return ((self.offset_from is None or offset >= self.offset_from)
                and (self.offset_to is None or offset < self.offset_to))

    def time_ok(self, millis: int) -> bool:
        return (self.since is None or millis >= self.since) and (self.until is None or millis < self.until)

    def queue_ok(self, topic: str, queue_id: int) -> bool:
        return (self.topics is None or topic in self.topics) and (self.queues is None or queue_id in self.queues)

    def queue_offset_ok(self, q: int) -> bool:
        return ((self.queue_offset_from is None or q >= self.queue_offset_from)
                and (self.queue_offset_to is None or q < self.queue_offset_to))

    def full(self) -> bool:
        return self.limit is not None and self.shown >= self.limit


def _rel(layout_root: Path | None):
    def display(path) -> str:
        path = Path(path)
        if layout_root is not None:
            try:
                return str(path.relative_to(layout_root))
            except ValueError:
                pass
        return str(path)
    return display


def _infer_kind(path: Path) -> str:
    if path.name == "checkpoint":
        return "checkpoint"
    if path.suffix == ".json":
        return "config"
    if is_index_name(path.name) or path.parent.name == "index":
        return "index"
    if is_offset_name(path.name):
        if len(path.parents) >= 3 and path.parent.parent.parent.name == "consumequeue":
            return "consumequeue"
        return "commitlog"
    raise UsageError(f"cannot tell what kind of file {path} is; give KIND "
                     f"({', '.join(KINDS)})")


@click.command("dump")
@click.argument("target", metavar="STORE|FILE", type=click.Path(path_type=str))
@click.argument("kind", required=False, type=click.Choice(KINDS))
@options.config_option
@options.json_option
@click.option("--topic", "topics", multiple=True, help="Only this topic (repeatable).")
@click.option("--queue", "queues", multiple=True, type=int, help="Only this queue id (repeatable).")
@click.option("--offset-from", type=int, help="Only commitlog offsets >= this.")
@click.option("--offset-to", type=int, help="Only commitlog offsets < this.")
@click.option("--queue-offset-from", type=int, help="consumequeue: only queue offsets >= this.")
@click.option("--queue-offset-to", type=int, help="consumequeue: only queue offsets < this.")
@click.option("--since", help="Only store times >= this (epoch ms or ISO 8601, UTC by default).")
@click.option("--until", help="Only store times < this.")
@click.option("--limit", type=click.IntRange(min=0), help="Stop after this many entries.")
@click.option("--body", "body_format", type=click.Choice(BODY_FORMATS),
              help="How to show bodies: text, hex or base64 (default: text in tables, base64 in JSON).")
@click.option("--no-body", is_flag=True, help="Leave bodies out.")
@click.option("--no-crc", is_flag=True, help="Do not recompute body CRCs.")
@click.option("--slots", is_flag=True, help="index: also list the non-empty hash slots.")
@options.progress_option
def cli(target, kind, config_path, settings, as_json, topics, queues, offset_from, offset_to,
        queue_offset_from, queue_offset_to, since, until, limit, body_format, no_body, no_crc, slots,
        progress):
    """Show commitlog records, consume queue units, index entries, the checkpoint or config files.

    STORE is a store directory (then KIND is required) or one file of a store (KIND is
    inferred from its place, or given).
    """
    filters = Filters(topics, queues, offset_from, offset_to, queue_offset_from, queue_offset_to,
                      since, until, limit)
    path = Path(target)
    body = None if no_body else (body_format or ("base64" if as_json else "text"))
    ctx = {"json": as_json, "body": body, "crc": not no_crc, "progress": progress, "slots": slots,
           "first_problem": None}
    if path.is_file():
        kind = kind or _infer_kind(path)
        problems = _dump_file(path, kind, config_path, settings, filters, ctx)
    else:
        if kind is None:
            if not path.exists():
                raise NotAStoreError("no such store directory or file", path=path)
            raise UsageError("give KIND after STORE: " + ", ".join(KINDS))
        layout = options.open_layout(target, config_path, settings)
        problems = _dump_store(layout, kind, filters, ctx)
    if problems:
        where, offset, what = ctx["first_problem"] or (None, None, None)
        first = f"{what} ({problems} problem(s) found; see the entries marked above)" if what else \
            f"{problems} problem(s) found; see the entries marked above"
        raise ProblemsFound(first, path=where, offset=offset)


def _first_problem(ctx, path, offset, kind) -> None:
    """Remember where the first problem is: the error line on stderr names it."""
    if ctx["first_problem"] is None:
        ctx["first_problem"] = (str(path), offset, kind)


def _dump_store(layout, kind, filters, ctx) -> int:
    display = _rel(layout.root)
    if kind == "commitlog":
        queue = commitlog.open_queue(layout)
        with queue:
            return _dump_commitlog(queue, layout.config.delay_levels_ms(), filters, ctx, display)
    if kind == "consumequeue":
        problems = 0
        table = None if ctx["json"] else _cq_table()
        for cq in consumequeue.open_all(layout, topics=filters.topics, queue_ids=filters.queues):
            try:
                problems += _dump_cq(cq, filters, ctx, display, table)
            finally:
                cq.close()
            if filters.full():
                break
        if table:
            table.flush()
        return problems
    if kind == "index":
        slots, entries = layout.index_geometry()
        problems = 0
        for info in layout.index_files():
            if filters.full():
                break
            problems += _dump_index(info.path, slots, entries, filters, ctx, display)
        return problems
    if kind == "checkpoint":
        return _dump_checkpoint(layout.checkpoint_path, ctx, display)
    if kind == "config":
        problems = 0
        for name in ("topics.json", "consumerOffset.json", "delayOffset.json", "subscriptionGroup.json"):
            path = layout.config_dir / name
            if path.exists():
                problems += _dump_config(path, ctx, display)
        return problems
    raise UsageError(f"unknown kind {kind}")


def _dump_file(path: Path, kind, config_path, settings, filters, ctx) -> int:
    display = _rel(None)
    if kind == "commitlog":
        queue = MappedFileQueue([path], path.stat().st_size, strict=False)
        with queue:
            from mqtool.config import config_for_store

            config = config_for_store(None, config_path, options.parse_settings(settings))
            return _dump_commitlog(queue, config.delay_levels_ms(), filters, ctx, display)
    if kind == "consumequeue":
        topic, queue_id = path.parent.parent.name, int(path.parent.name) if path.parent.name.isdigit() else -1
        cq = consumequeue.ConsumeQueue(topic, queue_id, path.parent, path.stat().st_size)
        # only this one file
        cq.files.close()
        cq.files = MappedFileQueue([path], path.stat().st_size, strict=False)
        table = None if ctx["json"] else _cq_table()
        try:
            problems = _dump_cq(cq, filters, ctx, display, table)
        finally:
            cq.close()
        if table:
            table.flush()
        return problems
    if kind == "index":
        from mqtool.config import config_for_store

        config = config_for_store(None, config_path, options.parse_settings(settings))
        if config_path or settings:
            slots, entries = config.maxHashSlotNum, config.maxIndexNum
        else:
            size = path.stat().st_size
            slots, rest = divmod(size - index_format.HEADER_SIZE, 4 + 80)
            if rest or slots <= 0:
                raise UsageError(f"{path}: cannot infer maxHashSlotNum/maxIndexNum from {size} bytes; "
                                 "use --config or --set maxHashSlotNum=.. --set maxIndexNum=..")
            entries = 4 * slots
        return _dump_index(path, slots, entries, filters, ctx, display)
    if kind == "checkpoint":
        return _dump_checkpoint(path, ctx, display)
    if kind == "config":
        return _dump_config(path, ctx, display)
    raise UsageError(f"unknown kind {kind}")


# ----------------------------------------------------------------- commitlog

def _cl_table():
    return output.TableStream("commitlog", [
        ("offset", {"justify": "right"}), ("size", {"justify": "right"}), ("topic", {}),
        ("queue", {"justify": "right"}), ("q-offset", {"justify": "right"}), ("store time", {}),
        ("tags", {}), ("keys", {}), ("body", {"overflow": "ellipsis", "max_width": BODY_CUT}),
        ("check", {})])


def _dump_commitlog(queue, delay_levels, filters, ctx, display) -> int:
    problems = 0
    counts = {"records": 0, "blanks": 0, "problems": 0, "shown": 0}
    table = None if ctx["json"] else _cl_table()
    total = sum(mf.file_size for mf in queue.files)
    last_end = None
    for lp in queue.problems[:1]:  # the walk yields these first
        _first_problem(ctx, display(lp.path), None, lp.kind)
    files = _FileOf(queue, display)
    stopped = None   # where --limit ended the walk (the rest of the log was not read)
    with output.progress(total, "dump commitlog", enabled=ctx["progress"]) as bar:
        next_update = 0
        for entry in commitlog.walk(queue, start=filters.offset_from, end=filters.offset_to,
                                    check_crc=ctx["crc"], path_display=display):
            if isinstance(entry, Record):
                counts["records"] += 1
                last_end = entry.offset + entry.total_size
                mf = files.at(entry.offset)
                if entry.offset >= next_update:  # move the bar every PROGRESS_STEP bytes, not every record
                    bar.update(entry.offset - queue.min_offset)
                    next_update = entry.offset + PROGRESS_STEP
                found = commitlog.record_problems(entry, ctx["crc"])
                if found:
                    problems += len(found)
                    counts["problems"] += len(found)
                    if mf is not None:
                        _first_problem(ctx, files.path, entry.offset - files.start, found[0][0])
                if not (filters.time_ok(entry.store_timestamp)
                        and filters.queue_ok(entry.topic, entry.queue_id)
                        and filters.queue_offset_ok(entry.queue_offset)):
                    continue
                filters.shown += 1
                counts["shown"] += 1
                _emit_record(entry, found, delay_levels, ctx, files, table)
                if filters.full():
                    stopped = entry.offset + entry.total_size
                    break
            elif isinstance(entry, Blank):
                counts["blanks"] += 1
                last_end = entry.offset + entry.total_size
                if ctx["json"] and not filters.full():
                    files.at(entry.offset)
                    output.emit_json({"type": "blank", "file": files.path,
                                      "fileOffset": entry.offset - files.start,
                                      "offset": entry.offset, "size": entry.total_size})
            elif isinstance(entry, Problem):
                problems += 1
                counts["problems"] += 1
                _first_problem(ctx, entry.path, entry.file_offset, entry.kind)
                if ctx["json"]:
                    output.emit_json(entry.to_json())
                else:
                    table.add(entry.offset, entry.skipped or "", "", "", "", "", "", "",
                              entry.message, f"[{entry.kind}]")
            elif isinstance(entry, EndOfData):
                last_end = entry.offset
                if ctx["json"]:
                    output.emit_json({"type": "end", "file": entry.path, "offset": entry.offset})
    summary = {"type": "summary", "kind": "commitlog", "records": counts["records"],
               "blanks": counts["blanks"], "problems": counts["problems"], "shown": counts["shown"],
               "endOffset": last_end, "complete": stopped is None}
    if stopped is not None:
        summary["stoppedAt"] = stopped
    if ctx["json"]:
        output.emit_json(summary)
    else:
        table.flush()
        where = (f"stopped at offset {stopped} (--limit); the rest was not read" if stopped is not None
                 else f"data ends at offset {last_end}")
        output.note(f"{counts['records']} records, {counts['blanks']} blanks, "
                    f"{counts['problems']} problems; {where}")
    return problems


class _FileOf:
    """queue.find_by_offset with the file's display path, looked up once per file, not per record.

    After at(offset): mf is the file (None outside the queue), path its display path
    (None outside) and start its first offset (0 outside).  The last answer is reused
    only while the files tile the offsets exactly (no load problems): then it is the
    only file that can hold the offset.
    """

    def __init__(self, queue, display):
        self.queue = queue
        self.display = display
        self.reuse = not queue.problems
        self.mf = None
        self.path = None
        self.start = 0
        self.end = 0

    def at(self, offset: int):
        if not (self.reuse and self.mf is not None and self.start <= offset < self.end):
            self.mf = self.queue.find_by_offset(offset)
            if self.mf is None:
                self.path, self.start, self.end = None, 0, 0
            else:
                self.path = self.display(self.mf.path)
                self.start, self.end = self.mf.file_from_offset, self.mf.file_end_offset
        return self.mf


def _emit_record(record, found, delay_levels, ctx, files, table) -> None:
    fields = message_fields(record, body=ctx["body"])
    dispatch = dispatchrequest.from_record(record, delay_levels, fields["properties"])
    if ctx["json"]:
        line = {"type": "message", "file": files.path, "fileOffset": record.offset - files.start}
        line.update(fields)
        line["tagsCode"] = dispatch.tags_code
        line["dispatchedToConsumeQueue"] = dispatch.goes_to_consume_queue
        line["ok"] = not found
        if found:
            line["problems"] = [{"kind": k, "message": m} for k, m in found]
        output.emit_json(line)
        return
    body = fields.get("bodyDecompressed", fields.get("body", ""))
    if body and len(body) > BODY_CUT:
        body = body[:BODY_CUT - 1] + "…"
    check = "ok" if not found else ", ".join(k for k, _ in found)
    table.add(record.offset, record.total_size, fields["topic"], record.queue_id, record.queue_offset,
              storeinfo.iso(record.store_timestamp), fields["tags"] or "", fields["keys"] or "",
              (body or "").replace("\n", "⏎"), check)


# -------------------------------------------------------------- consume queue

def _cq_table():
    return output.TableStream("consumequeue", [
        ("topic", {}), ("queue", {"justify": "right"}), ("q-offset", {"justify": "right"}),
        ("commitlog offset", {"justify": "right"}), ("size", {"justify": "right"}),
        ("tagsCode", {"justify": "right"}), ("check", {})])


def _dump_cq(cq, filters, ctx, display, table) -> int:
    problems = 0
    for lp in cq.files.problems:
        problems += 1
        _first_problem(ctx, display(lp.path), None, lp.kind)
        _emit_problem(Problem(lp.kind, display(lp.path), 0, lp.offset or 0, lp.message), ctx, table)
    ended = False
    for unit in cq.units(filters.queue_offset_from or 0, filters.queue_offset_to, stop_at_invalid=False):
        valid = is_valid_unit(unit.commitlog_offset, unit.size)
        check = "ok"
        if not valid:
            check = "invalid"
            ended = True
        elif ended:
            check = "after-invalid"
        if check != "ok":
            problems += 1
            _first_problem(ctx, display(unit.path), unit.file_offset, f"{check} unit")
        if filters.full():
            continue
        if not filters.offset_ok(unit.commitlog_offset):
            continue
        filters.shown += 1
        if ctx["json"]:
            output.emit_json({"type": "cq_unit", "topic": unit.topic, "queueId": unit.queue_id,
                              "offset": unit.queue_offset, "commitLogOffset": unit.commitlog_offset,
                              "size": unit.size, "tagsCode": unit.tags_code, "file": display(unit.path),
                              "fileOffset": unit.file_offset, "ok": check == "ok",
                              **({} if check == "ok" else {"problem": check})})
        else:
            table.add(unit.topic, unit.queue_id, unit.queue_offset, unit.commitlog_offset, unit.size,
                      unit.tags_code, check)
    return problems


def _emit_problem(problem: Problem, ctx, table) -> None:
    if ctx["json"]:
        output.emit_json(problem.to_json())
    elif table is not None:
        table.add(problem.path, "", "", "", "", "", f"{problem.kind}: {problem.message}")
    else:
        output.note(f"{problem.path}: {problem.kind}: {problem.message}")


# ---------------------------------------------------------------------- index

def _dump_index(path, slots, entries, filters, ctx, display) -> int:
    problems = 0
    try:
        ix = IndexFile(path, slots, entries)
    except NotAStoreError as exc:
        _emit_problem(Problem("bad-index-file", display(path), exc.offset or 0, 0, exc.message), ctx, None)
        _first_problem(ctx, display(path), exc.offset, "bad-index-file")
        return 1
    try:
        header = ix.header()
        size_note = None
        if not ix.size_ok:
            problems += 1
            _first_problem(ctx, display(path), None, "bad-file-size")
            size_note = f"file is {ix.size} bytes, expected {ix.expected_size}"
        if ctx["json"]:
            line = {"type": "index_header", "file": display(path), "size": ix.size,
                    "maxHashSlotNum": slots, "maxIndexNum": entries, **header.to_json()}
            if size_note:
                line["problem"] = size_note
            output.emit_json(line)
        else:
            output.stdout().print(
                f"[bold]{escape(display(path))}[/bold]  {header.index_count - 1} entries, "
                f"{header.hash_slot_count} slots used, offsets {header.begin_phy_offset}.."
                f"{header.end_phy_offset}, times {storeinfo.iso(header.begin_timestamp)} .. "
                f"{storeinfo.iso(header.end_timestamp)}" + (f"  [red]{size_note}[/red]" if size_note else ""),
                highlight=False)
        table = None if ctx["json"] else output.TableStream(None, [
            ("entry", {"justify": "right"}), ("keyHash", {"justify": "right"}),
            ("slot", {"justify": "right"}), ("commitlog offset", {"justify": "right"}),
            ("time", {}), ("prev", {"justify": "right"})])
        for entry in ix.entries():
            if filters.full():
                break
            time_ms = header.begin_timestamp + entry.time_diff * 1000
            if not filters.offset_ok(entry.phy_offset) or not filters.time_ok(time_ms):
                continue
            filters.shown += 1
            slot = entry.key_hash % slots if entry.key_hash >= 0 else None
            if ctx["json"]:
                output.emit_json({"type": "index_entry", "file": display(path), "entry": entry.number,
                                  "keyHash": entry.key_hash, "slot": slot, "phyOffset": entry.phy_offset,
                                  "timeDiff": entry.time_diff, "timestamp": time_ms,
                                  "prevIndex": entry.prev_index})
            else:
                table.add(entry.number, entry.key_hash, slot, entry.phy_offset, storeinfo.iso(time_ms),
                          entry.prev_index)
        if table:
            table.flush()
        if ctx.get("slots"):
            for number in range(slots):
                value = ix.slot(number)
                if not value:
                    continue
                if ctx["json"]:
                    output.emit_json({"type": "index_slot", "file": display(path), "slot": number,
                                      "entry": value})
                else:
                    output.stdout().print(f"  slot {number} -> entry {value}", highlight=False)
    finally:
        ix.close()
    return problems


# ----------------------------------------------------------------- small files

def _dump_checkpoint(path, ctx, display) -> int:
    cp = metafiles.read_checkpoint(path)
    problems = 0
    line = {"type": "checkpoint", "file": display(path), **cp}
    if cp["fileSize"] != 4096:
        problems += 1
        _first_problem(ctx, display(path), None, "bad-file-size")
        line["problem"] = f"checkpoint is {cp['fileSize']} bytes, expected 4096"
    for name in ("physicMsgTimestamp", "logicsMsgTimestamp", "indexMsgTimestamp"):
        line[name + "Iso"] = storeinfo.iso(cp[name])
    if ctx["json"]:
        output.emit_json(line)
    else:
        table = output.TableStream(f"checkpoint {display(path)}", [("field", {}), ("value", {"justify": "right"}),
                                                                  ("time (UTC)", {})])
        for name in ("physicMsgTimestamp", "logicsMsgTimestamp", "indexMsgTimestamp",
                     "masterFlushedOffset", "confirmPhyOffset", "fileSize"):
            table.add(name, cp[name], line.get(name + "Iso") or "")
        table.flush()
    return problems


def _dump_config(path, ctx, display) -> int:
    doc = metafiles.read_config_json(path)
    if ctx["json"]:
        output.emit_json({"type": "config", "file": display(path), "content": _jsonable(doc)})
    else:
        import json

        output.stdout().print(f"[bold]{escape(display(path))}[/bold]", highlight=False)
        output.stdout().print(json.dumps(_jsonable(doc), indent=2, ensure_ascii=False), highlight=False,
                              markup=False)
    return 0


def _jsonable(value):
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    return value
