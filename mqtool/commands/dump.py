"""`mqtool dump STORE KIND` / `mqtool dump FILE`: the files as they are on disk.

dump shows every entry it finds, including what a broker's recovery would
drop, and marks each entry that fails a check.  Exit 1 when anything failed.
"""

from __future__ import annotations

from contextlib import nullcontext
from pathlib import Path

import click
from rich.markup import escape

from mqtool.cli import options, output
from mqtool.commands import _batchdump, _timerdump
from mqtool.errors import NotAStoreError, ProblemsFound, UsageError
from mqtool.forensics import dumpwalk, storeinfo
from mqtool.forensics.dumpwalk import Tally, relative_paths
from mqtool.forensics.filters import Filters
from mqtool.forensics.messageview import BODY_FORMATS, message_fields
from mqtool.formats import dledger as dledger_format
from mqtool.formats.commitlog import Blank
from mqtool.formats import index as index_format
from mqtool.formats.filenames import is_index_name, is_offset_name
from mqtool.pipeline.local import Behind
from mqtool.storage import batchqueue, census, commitlog, consumequeue, dispatchrequest, dledger, metafiles, timerstore
from mqtool.storage.commitlog import Problem
from mqtool.storage.indexfile import IndexFile
from mqtool.storage.mappedfilequeue import MappedFileQueue
from mqtool.storage.settings import open_layout, parse_settings

KINDS = ("commitlog", "consumequeue", "index", "checkpoint", "config", "timerlog", "timerwheel", "timercheck",
         "timermetrics", "batchconsumequeue", "dledger")
BODY_CUT = 48
BLOCK_ROWS = 8192     # records a block of JSON lines (their text is in memory at once)
COLUMNAR_JSON = True  # False: JSON lines record by record (the reference the tests compare with)
COLUMNAR_FROM = 64 << 20  # commitlog bytes from which JSON lines take the columnar path (below, loading
                          # its compiled kernels, ~0.5 s, costs more than the record-by-record path)


def _infer_kind(path: Path) -> str:
    folder = path.parent.parent if path.parent.name == dledger.INDEX_DIR else path.parent
    if (folder / dledger.DATA_DIR).is_dir() and dledger.is_dledger_dir(folder):
        raise UsageError(f"{path} is one of DLedger's own files (state or entry index): `mqtool dump STORE "
                         "dledger` shows them with the entries, `mqtool info STORE` the state")
    if path.name in ("checkpoint", "timerwheel", "timercheck"):
        return path.name
    if path.name in ("timermetrics", "timermetrics.bak"):
        return "timermetrics"
    if is_offset_name(path.name) and path.parent.name == "timerlog":
        return "timerlog"     # not a commitlog: 52-byte timer units
    if is_offset_name(path.name) and len(path.parents) >= 3 and path.parent.parent.parent.name == "batchconsumequeue":
        return "batchconsumequeue"    # 46-byte batch units
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
    filters = Filters.from_options(topics, queues, since, until, offset_from, offset_to, queue_offset_from,
                                   queue_offset_to)
    path = Path(target)
    body = None if no_body else (body_format or ("base64" if as_json else "text"))
    ctx = {"json": as_json, "body": body, "crc": not no_crc, "progress": progress, "slots": slots,
           "tally": Tally(limit)}
    if path.is_file():
        kind = kind or _infer_kind(path)
        _dump_file(path, kind, config_path, settings, filters, ctx)
    else:
        if kind is None:
            if not path.exists():
                raise NotAStoreError("no such store directory or file", path=path)
            raise UsageError("give KIND after STORE: " + ", ".join(KINDS))
        layout = open_layout(target, config_path, settings)
        output.in_use([layout], as_json)
        _dump_store(layout, kind, filters, ctx)
    problems = ctx["tally"].problems
    if problems:
        where, offset, what = ctx["tally"].first_problem or (None, None, None)
        first = f"{what} ({problems} problem(s) found; see the entries marked above)" if what else \
            f"{problems} problem(s) found; see the entries marked above"
        raise ProblemsFound(first, path=where, offset=offset)


def _dump_store(layout, kind, filters, ctx) -> None:
    display = relative_paths(layout.root)
    tally = ctx["tally"]
    if kind == "commitlog":
        queue = commitlog.open_queue(layout)
        with queue:
            _dump_commitlog(queue, layout.config.delay_levels_ms(), filters, ctx, display)
    elif kind == "consumequeue":
        consumequeue.require_files(layout)
        table = None if ctx["json"] else _cq_table()
        for cq in consumequeue.open_all(layout, topics=filters.topics, queue_ids=filters.queue_ids):
            try:
                _dump_cq(cq, filters, ctx, display, table)
            finally:
                cq.close()
            if tally.full():
                break
        if table:
            table.flush()
    elif kind == "index":
        slots, entries = layout.index_geometry()
        for info in layout.index_files():
            if tally.full():
                break
            _dump_index(info.path, slots, entries, filters, ctx, display)
    elif kind == "checkpoint":
        _dump_checkpoint(layout.checkpoint_path, ctx, display)
    elif kind == "config":
        for name in census.CONFIG_JSON:   # each file, then the .bak a broker falls back to
            for path in (layout.config_dir / name, layout.config_dir / (name + ".bak")):
                if path.name.endswith(".json") or path.name.endswith(".json.bak"):
                    if path.exists():
                        _dump_config(path, ctx, display)
    elif kind in ("timerlog", "timerwheel"):
        if not timerstore.exists(layout):
            raise NotAStoreError("no timer store here (timerWheelEnable is off, or a 4.x store)", path=layout.root)
        with _timerdump.store_view(layout) as view:
            if kind == "timerlog":
                _timerdump.dump_timerlog(view.ts, filters, ctx, display, view)
            elif view.ts.wheel() is None:
                raise NotAStoreError("no timerwheel in this store (timerWheelEnable is off, or a 4.x store)",
                                     path=layout.timerwheel_path)
            else:
                _timerdump.dump_timerwheel(view, filters, ctx, display)
    elif kind == "timercheck":
        _timerdump.dump_timercheck(layout.timercheck_path, ctx, display)
    elif kind == "timermetrics":
        if not timerstore.exists(layout):
            _timerdump.dump_timermetrics(layout, None, ctx, display)
        else:
            with _timerdump.store_view(layout) as view:
                _timerdump.dump_timermetrics(layout, view, ctx, display)
    elif kind == "dledger":
        if not layout.is_dledger():
            raise NotAStoreError("not a DLedger store (no dledger-<selfId>/ with data/ here)", path=layout.root)
        _dump_dledger(layout, filters, ctx, display)
    elif kind == "batchconsumequeue":
        if not batchqueue.queues(layout):
            raise NotAStoreError("no batch consume queue here (no batchconsumequeue/<topic>/<queueId>/)",
                                 path=layout.root)
        _batchdump.dump_batch_queues(_batchdump.store_queues(layout), filters, ctx, display)
    else:
        raise UsageError(f"unknown kind {kind}")


def _dump_file(path: Path, kind, config_path, settings, filters, ctx) -> None:
    display = relative_paths(None)
    if kind == "commitlog":
        queue = MappedFileQueue([path], path.stat().st_size, strict=False)
        with queue:
            from mqtool.storage.config import config_for_store

            config = config_for_store(None, config_path, parse_settings(settings))
            _dump_commitlog(queue, config.delay_levels_ms(), filters, ctx, display)
    elif kind == "consumequeue":
        topic, queue_id = path.parent.parent.name, int(path.parent.name) if path.parent.name.isdigit() else -1
        cq = consumequeue.ConsumeQueue(topic, queue_id, path.parent, path.stat().st_size)
        # only this one file
        cq.files.close()
        cq.files = MappedFileQueue([path], path.stat().st_size, strict=False)
        table = None if ctx["json"] else _cq_table()
        try:
            _dump_cq(cq, filters, ctx, display, table)
        finally:
            cq.close()
        if table:
            table.flush()
    elif kind == "index":
        from mqtool.storage.config import config_for_store

        config = config_for_store(None, config_path, parse_settings(settings))
        if config_path or settings:
            slots, entries = config.maxHashSlotNum, config.maxIndexNum
        else:
            size = path.stat().st_size
            slots, rest = divmod(size - index_format.HEADER_SIZE, 4 + 80)
            if rest or slots <= 0:
                raise UsageError(f"{path}: cannot infer maxHashSlotNum/maxIndexNum from {size} bytes; "
                                 "use --config or --set maxHashSlotNum=.. --set maxIndexNum=..")
            entries = 4 * slots
        _dump_index(path, slots, entries, filters, ctx, display)
    elif kind == "checkpoint":
        _dump_checkpoint(path, ctx, display)
    elif kind == "config":
        _dump_config(path, ctx, display)
    elif kind in ("timerlog", "timerwheel"):
        root = path.parent.parent if kind == "timerlog" else path.parent
        layout = open_layout(str(root), config_path, settings, must_exist=False)
        if kind == "timerlog":
            with timerstore.TimerStore(layout, paths=[path]) as ts:
                _timerdump.dump_timerlog(ts, filters, ctx, display)
        else:
            with _timerdump.store_view(layout) as view:
                _timerdump.dump_timerwheel(view, filters, ctx, display)
    elif kind == "timercheck":
        _timerdump.dump_timercheck(path, ctx, display)
    elif kind == "timermetrics":
        layout = open_layout(str(path.parent.parent), config_path, settings, must_exist=False)
        with _timerdump.store_view(layout) as view:
            _timerdump.dump_timermetrics(layout, view, ctx, display)
    elif kind == "batchconsumequeue":
        _batchdump.dump_batch_queues(_batchdump.file_queue(path), filters, ctx, display)
    else:
        raise UsageError(f"unknown kind {kind}")


# ----------------------------------------------------------------- commitlog

def _cl_table():
    return output.TableStream("commitlog", [
        ("offset", {"justify": "right"}), ("size", {"justify": "right"}), ("topic", {}),
        ("queue", {"justify": "right"}), ("q-offset", {"justify": "right"}), ("store time", {}),
        ("tags", {}), ("keys", {}), ("body", {"overflow": "ellipsis", "max_width": BODY_CUT}),
        ("check", {})])


def _dump_commitlog(queue, delay_levels, filters, ctx, display) -> None:
    tally = ctx["tally"]
    records, blanks, problems = tally.records, tally.blanks, tally.problems   # this walk's counts are the rise
    table = None if ctx["json"] else _cl_table()
    total = sum(mf.file_size for mf in queue.files)
    scanner = None
    if ctx["json"] and COLUMNAR_JSON and total >= COLUMNAR_FROM:   # JSON lines from the columnar read path
        from mqtool.native import fastscan as scanner
    rendered = Behind() if scanner else None    # each block rendered and written while the next is decoded
    with output.progress(total, "dump commitlog", enabled=ctx["progress"]) as bar, rendered or nullcontext():
        for event in dumpwalk.walk_commitlog(queue, filters, tally, check_crc=ctx["crc"], display=display,
                                             on_progress=bar.update, scanner=scanner):
            what, entry = event[0], event[1]
            if what == "records":
                _emit_records(entry, event[2], event[3], delay_levels, ctx, rendered)
                continue
            if rendered:
                rendered.wait()     # the lines before this entry first
            if what == "record":
                _emit_record(entry, event[2], delay_levels, ctx, event[3], table)
            elif what == "blank":
                files = event[2]
                if ctx["json"] and not tally.full():
                    output.emit_json({"type": "blank", "file": files.path, "fileOffset": entry.offset - files.start,
                                      "offset": entry.offset, "size": entry.total_size})
            elif what == "problem":
                if ctx["json"]:
                    output.emit_json(entry.to_json())
                else:
                    table.add(entry.offset, entry.skipped or "", "", "", "", "", "", "",
                              entry.message, f"[{entry.kind}]")
            elif ctx["json"]:   # the end of the data
                output.emit_json({"type": "end", "file": entry.path, "offset": entry.offset})
        if rendered:
            rendered.wait()
    counts = {"records": tally.records - records, "blanks": tally.blanks - blanks,
              "problems": tally.problems - problems}
    stopped = tally.stopped_at
    summary = {"type": "summary", "kind": "commitlog", **counts, "shown": tally.shown,
               "endOffset": tally.end_offset, "complete": stopped is None}
    if stopped is not None:
        summary["stoppedAt"] = stopped
    if ctx["json"]:
        output.emit_json(summary)
    else:
        table.flush()
        where = (f"stopped at offset {stopped} (--limit); the rest was not read" if stopped is not None
                 else f"data ends at offset {tally.end_offset}")
        output.note(f"{counts['records']} records, {counts['blanks']} blanks, "
                    f"{counts['problems']} problems; {where}")


def _message_lines(body):
    """The fields of dump's `message` lines in order (those of _emit_record), for blockjson."""
    from mqtool.forensics import blockjson
    from mqtool.native import jsonlines as jl
    from mqtool.pipeline.schema import MESSAGE_COLUMNS

    fields = [("type", jl.CONST, "message"), ("file", jl.CONST, None), ("fileOffset", jl.INT, None)]
    fields += [(name, blockjson.kind_of(kind), None) for name, kind in MESSAGE_COLUMNS]
    if body:
        fields += [("body", blockjson.BODY_KINDS[body], None), ("bodyDecompressed", jl.RAW, None)]
    fields += [("tagsCode", jl.INT, None), ("dispatchedToConsumeQueue", jl.BOOL, None), ("ok", jl.BOOL, None),
               ("problems", jl.RAW, None)]
    return blockjson.Lines(fields)


def _write_lines(lines, block, consts, raws) -> None:
    output.emit_json_lines(lines.render(block, None, consts, raws))


def _emit_records(chunk, shown, files, delay_levels, ctx, rendered) -> None:
    """The JSON lines of a chunk's records to show, a block at a time, by compiled code."""
    from mqtool.forensics import blockjson, rowblocks

    body = ctx["body"]
    if "lines" not in ctx:
        ctx["lines"] = _message_lines(body)
    for block in rowblocks.blocks(chunk, files.start, delay_levels, keep=shown, check_crc=ctx["crc"],
                                  with_body=body is not None, rows=BLOCK_ROWS):
        raws = {"problems": blockjson.problems_fragments(block)}
        if body:
            raws["bodyDecompressed"] = blockjson.decompressed_fragments(block, body)
        rendered.run(_write_lines, ctx["lines"], block, {"file": files.path}, raws)


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


def _dump_cq(cq, filters, ctx, display, table) -> None:
    for event in dumpwalk.walk_queue(cq, filters, ctx["tally"], display):
        if event[0] == "problem":
            _emit_problem(event[1], ctx, table)
            continue
        unit, check = event[1], event[2]
        if ctx["json"]:
            output.emit_json({"type": "cq_unit", "topic": unit.topic, "queueId": unit.queue_id,
                              "offset": unit.queue_offset, "commitLogOffset": unit.commitlog_offset,
                              "size": unit.size, "tagsCode": unit.tags_code, "file": display(unit.path),
                              "fileOffset": unit.file_offset, "ok": check == "ok",
                              **({} if check == "ok" else {"problem": check})})
        else:
            table.add(unit.topic, unit.queue_id, unit.queue_offset, unit.commitlog_offset, unit.size,
                      unit.tags_code, check)


def _emit_problem(problem: Problem, ctx, table) -> None:
    if ctx["json"]:
        output.emit_json(problem.to_json())
    elif table is not None:
        table.add(problem.path, "", "", "", "", "", f"{problem.kind}: {problem.message}")
    else:
        output.note(f"{problem.path}: {problem.kind}: {problem.message}")


# ---------------------------------------------------------------------- index

def _dump_index(path, slots, entries, filters, ctx, display) -> None:
    tally = ctx["tally"]
    try:
        ix = IndexFile(path, slots, entries)
    except NotAStoreError as exc:
        _emit_problem(Problem("bad-index-file", display(path), exc.offset or 0, 0, exc.message), ctx, None)
        tally.problems += 1
        tally.note_problem(display(path), exc.offset, "bad-index-file")
        return
    try:
        header = ix.header()
        size_note = None
        if not ix.size_ok:
            tally.problems += 1
            tally.note_problem(display(path), None, "bad-file-size")
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
        for entry, time_ms in dumpwalk.index_entries(ix, header, filters, tally):
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


# ----------------------------------------------------------------- small files

def _dump_dledger(layout, filters, ctx, display) -> None:
    """The raw DLedger entries and blanks (file order) with their ledger checks, the index units,
    then the state (term, vote, committed index) and a summary."""
    from mqtool.forensics import dledgerscan

    tally, scan = ctx["tally"], dledgerscan.LedgerScan()
    table = None if ctx["json"] else output.TableStream("dledger entries", [
        ("file", {}), ("byte", {"justify": "right"}), ("pos", {"justify": "right"}), ("index", {"justify": "right"}),
        ("term", {"justify": "right"}), ("size", {"justify": "right"}), ("record", {"justify": "right"}),
        ("committed", {}), ("problems", {})])
    lo, hi = filters.offset_range     # inclusive
    for item in dledgerscan.scan(layout, scan, display, offset_from=lo, offset_to=None if hi is None else hi + 1):
        if tally.full():
            break
        if isinstance(item, dledgerscan.Checked):
            line = dledgerscan.entry_json(item)
            tally.shown += 1
            if item.problems:
                tally.problems += len(item.problems)
                tally.note_problem(line["file"], line["fileOffset"], item.problems[0][0])
            if table is None:
                output.emit_json(line)
            else:
                table.add(line["file"], line["fileOffset"], line["offset"], line["index"], line["term"], line["size"],
                          line["recordOffset"], "yes" if line["committed"] else "NO",
                          "; ".join(p["message"] for p in line.get("problems", [])))
        elif isinstance(item, Blank):
            tally.blanks += 1
            if table is None:
                output.emit_json({"type": "dledger_blank", "offset": item.offset, "size": item.total_size})
            else:
                table.add("", "", item.offset, "blank", "", item.total_size, "", "", "")
        elif isinstance(item, Problem):
            _emit_problem(item, ctx, None)
            tally.problems += 1
            tally.note_problem(item.path, item.file_offset, item.kind)
    if table is not None:
        table.flush()
    units = 0
    for path, pos, unit in dledgerscan.index_units(layout, display):
        if tally.full():
            break
        units += 1
        if ctx["json"]:
            output.emit_json({"type": "dledger_index_unit", "file": path, "unitOffset": pos,
                              "slot": pos // dledger_format.INDEX_UNIT_SIZE, "magic": unit.magic, "pos": unit.pos,
                              "size": unit.size, "index": unit.index, "term": unit.term})
    with commitlog.open_queue(layout) as queue:
        state = dledger.read_ledger(layout, queue).to_json()
    summary = {"entries": scan.entries, "blanks": scan.blanks, "indexUnits": units, "uncommitted": scan.uncommitted,
               "endOffset": scan.end_offset, "problems": scan.problems}
    if ctx["json"]:
        output.emit_json({"type": "dledger_state", **state})
        output.emit_json({"type": "summary", **summary})
    else:
        output.note(f"dledger {state['dledgerDir']}: term {state['currTerm']}, voted for {state['voteLeader']}, "
                    f"entries {state['ledgerBeginIndex']} .. {state['ledgerEndIndex']}, committed "
                    f"{state['committedIndex']} (pos {state['committedPos']}); {scan.entries} entries, {scan.blanks} "
                    f"blanks, {units} index units, {scan.uncommitted} uncommitted, {scan.problems} problem(s)")


def _dump_checkpoint(path, ctx, display) -> None:
    cp = metafiles.read_checkpoint(path)
    line = {"type": "checkpoint", "file": display(path), **cp}
    if cp["fileSize"] != 4096:
        ctx["tally"].problems += 1
        ctx["tally"].note_problem(display(path), None, "bad-file-size")
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


def _dump_config(path, ctx, display) -> None:
    try:
        doc = metafiles.read_config_json(path)
    except NotAStoreError as exc:   # damage: named, counted, and the dump goes on (to the .bak, say)
        _emit_problem(Problem("bad-config-file", display(path), exc.offset or 0, 0, exc.message), ctx, None)
        ctx["tally"].problems += 1
        ctx["tally"].note_problem(display(path), exc.offset, "bad-config-file")
        return
    if ctx["json"]:
        output.emit_json({"type": "config", "file": display(path), "content": _jsonable(doc)})
    else:
        import json

        output.stdout().print(f"[bold]{escape(display(path))}[/bold]", highlight=False)
        output.stdout().print(json.dumps(_jsonable(doc), indent=2, ensure_ascii=False), highlight=False,
                              markup=False)


def _jsonable(value):
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    return value
