"""How `dump` shows each kind: the events of forensics/dumpkinds.py as tables or JSON lines
(the timer store's kinds are in timershow)."""

from __future__ import annotations

import json
from contextlib import ExitStack

from rich.markup import escape

from mqtool.cli import output
from mqtool.cli import timershow
from mqtool.forensics.messageview import message_fields
from mqtool.engine.behind import Behind
from mqtool.storage import dispatchrequest
from mqtool.storage.commitlog import Problem

BODY_CUT = 48
BLOCK_ROWS = 8192     # records a block of JSON lines (their text is in memory at once)


def render(dump) -> None:
    """Show a dump (forensics.dumpkinds.Dump) as it walks."""
    RENDERERS[dump.kind](dump.events(), dump)


# ----------------------------------------------------------------- commitlog

def _commitlog(events, dump) -> None:
    options = dump.options
    table = None if options.json else output.TableStream("commitlog", [
        ("offset", {"justify": "right"}), ("size", {"justify": "right"}), ("topic", {}),
        ("queue", {"justify": "right"}), ("q-offset", {"justify": "right"}), ("store time", {}),
        ("tags", {}), ("keys", {}), ("body", {"overflow": "ellipsis", "max_width": BODY_CUT}),
        ("check", {})])
    rendered, lines, summary = None, None, None
    with ExitStack() as opened:
        for event in events:
            what, entry = event[0], event[1] if len(event) > 1 else None
            if what == "begin":
                delay_levels = event[2]
                bar = opened.enter_context(output.progress(entry, "dump commitlog", enabled=options.progress))
                if event[3]:    # each block rendered and written while the next is decoded
                    rendered = opened.enter_context(Behind())
                    lines = _message_lines(options.body)
                continue
            if what == "progress":
                bar.update(entry)
                continue
            if what == "records":
                _emit_records(entry, event[2], event[3], delay_levels, options, lines, rendered)
                continue
            if rendered:
                rendered.wait()     # the lines before this entry first
            if what == "record":
                _emit_record(entry, event[2], delay_levels, options, event[3], table)
            elif what == "blank":
                files = event[2]
                if options.json:
                    output.emit_json({"type": "blank", "file": files.path, "fileOffset": entry.offset - files.start,
                                      "offset": entry.offset, "size": entry.total_size})
            elif what == "problem":
                if options.json:
                    output.emit_json(entry.to_json())
                else:
                    table.add(entry.offset, entry.skipped or "", "", "", "", "", "", "",
                              entry.message, f"[{entry.kind}]")
            elif what == "end":
                if options.json:
                    output.emit_json({"type": "end", "file": entry.path, "offset": entry.offset})
            else:
                summary = entry
    if options.json:
        output.emit_json(summary)
    else:
        table.flush()
        stopped = summary.get("stoppedAt")
        where = (f"stopped at offset {stopped} (--limit); the rest was not read" if stopped is not None
                 else f"data ends at offset {summary['endOffset']}")
        output.note(f"{summary['records']} records, {summary['blanks']} blanks, "
                    f"{summary['problems']} problems; {where}")


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


def _emit_records(chunk, shown, files, delay_levels, options, lines, rendered) -> None:
    """The JSON lines of a chunk's records to show, a block at a time, by compiled code."""
    from mqtool.forensics import blockjson, rowblocks

    body = options.body
    for block in rowblocks.blocks(chunk, files.start, delay_levels, keep=shown, check_crc=options.crc,
                                  with_body=body is not None, rows=BLOCK_ROWS):
        raws = {"problems": blockjson.problems_fragments(block)}
        if body:
            raws["bodyDecompressed"] = blockjson.decompressed_fragments(block, body)
        rendered.run(_write_lines, lines, block, {"file": files.path}, raws)


def _emit_record(record, found, delay_levels, options, files, table) -> None:
    fields = message_fields(record, body=options.body)
    dispatch = dispatchrequest.from_record(record, delay_levels, fields["properties"])
    if options.json:
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
              output.utc_time(record.store_timestamp), fields["tags"] or "", fields["keys"] or "",
              (body or "").replace("\n", "⏎"), check)


# -------------------------------------------------------------- consume queue

def _consumequeue(events, dump) -> None:
    as_json, display = dump.options.json, dump.display
    table = None if as_json else output.TableStream("consumequeue", [
        ("topic", {}), ("queue", {"justify": "right"}), ("q-offset", {"justify": "right"}),
        ("commitlog offset", {"justify": "right"}), ("size", {"justify": "right"}),
        ("tagsCode", {"justify": "right"}), ("check", {})])
    for event in events:
        if event[0] == "problem":
            _emit_problem(event[1], as_json, table)
            continue
        unit, check = event[1], event[2]
        if as_json:
            output.emit_json({"type": "cq_unit", "topic": unit.topic, "queueId": unit.queue_id,
                              "offset": unit.queue_offset, "commitLogOffset": unit.commitlog_offset,
                              "size": unit.size, "tagsCode": unit.tags_code, "file": display(unit.path),
                              "fileOffset": unit.file_offset, "ok": check == "ok",
                              **({} if check == "ok" else {"problem": check})})
        else:
            table.add(unit.topic, unit.queue_id, unit.queue_offset, unit.commitlog_offset, unit.size,
                      unit.tags_code, check)
    if table:
        table.flush()


def _emit_problem(problem: Problem, as_json: bool, table=None) -> None:
    if as_json:
        output.emit_json(problem.to_json())
    elif table is not None:
        table.add(problem.path, "", "", "", "", "", f"{problem.kind}: {problem.message}")
    else:
        output.note(f"{problem.path}: {problem.kind}: {problem.message}")


# ---------------------------------------------------------------------- index

def _index(events, dump) -> None:
    as_json, display = dump.options.json, dump.display
    for event in events:
        what = event[0]
        if what == "problem":
            _emit_problem(event[1], as_json)
        elif what == "index_header":
            path, ix, header, size_note = event[1:]
            if as_json:
                line = {"type": "index_header", "file": display(path), "size": ix.size,
                        "maxHashSlotNum": ix.hash_slot_num, "maxIndexNum": ix.index_num, **header.to_json()}
                if size_note:
                    line["problem"] = size_note
                output.emit_json(line)
            else:
                output.stdout().print(
                    f"[bold]{escape(display(path))}[/bold]  {header.index_count - 1} entries, "
                    f"{header.hash_slot_count} slots used, offsets {header.begin_phy_offset}.."
                    f"{header.end_phy_offset}, times {output.utc_time(header.begin_timestamp)} .. "
                    f"{output.utc_time(header.end_timestamp)}" + (f"  [red]{size_note}[/red]" if size_note else ""),
                    highlight=False)
            table = None if as_json else output.TableStream(None, [
                ("entry", {"justify": "right"}), ("keyHash", {"justify": "right"}),
                ("slot", {"justify": "right"}), ("commitlog offset", {"justify": "right"}),
                ("time", {}), ("prev", {"justify": "right"})])
        elif what == "index_entry":
            entry, time_ms = event[1], event[2]
            slot = entry.key_hash % ix.hash_slot_num if entry.key_hash >= 0 else None
            if as_json:
                output.emit_json({"type": "index_entry", "file": display(path), "entry": entry.number,
                                  "keyHash": entry.key_hash, "slot": slot, "phyOffset": entry.phy_offset,
                                  "timeDiff": entry.time_diff, "timestamp": time_ms,
                                  "prevIndex": entry.prev_index})
            else:
                table.add(entry.number, entry.key_hash, slot, entry.phy_offset, output.utc_time(time_ms),
                          entry.prev_index)
        elif what == "index_entries_end":
            if table:
                table.flush()
        elif as_json:
            output.emit_json({"type": "index_slot", "file": display(path), "slot": event[1], "entry": event[2]})
        else:
            output.stdout().print(f"  slot {event[1]} -> entry {event[2]}", highlight=False)


# ----------------------------------------------------------------- small files

def _checkpoint(events, dump) -> None:
    for _, line, cp in events:
        if dump.options.json:
            output.emit_json(line)
            continue
        times = {name: line[name + "Iso"] for name in ("physicMsgTimestamp", "logicsMsgTimestamp", "indexMsgTimestamp")}
        timershow.fields_table(f"checkpoint {line['file']}", cp, times,
                                ("physicMsgTimestamp", "logicsMsgTimestamp", "indexMsgTimestamp",
                                 "masterFlushedOffset", "confirmPhyOffset", "fileSize"))


def _config(events, dump) -> None:
    for event in events:
        if event[0] == "problem":
            _emit_problem(event[1], dump.options.json)
            continue
        path, content = event[1], event[2]
        if dump.options.json:
            output.emit_json({"type": "config", "file": dump.display(path), "content": content})
        else:
            output.stdout().print(f"[bold]{escape(dump.display(path))}[/bold]", highlight=False)
            output.stdout().print(json.dumps(content, indent=2, ensure_ascii=False), highlight=False,
                                  markup=False)


def _batchconsumequeue(events, dump) -> None:
    table = None if dump.options.json else output.TableStream("batchconsumequeue", [
        ("topic", {}), ("queue", {"justify": "right"}), ("msgBaseOffset", {"justify": "right"}),
        ("batch", {"justify": "right"}), ("commitlog offset", {"justify": "right"}), ("size", {"justify": "right"}),
        ("tagsCode", {"justify": "right"}), ("store time (UTC)", {}), ("file", {}), ("byte", {"justify": "right"})])
    for _, line in events:
        if table is None:
            output.emit_json(line)
        elif line["type"] == "summary":
            table.flush()
            output.note(f"{line['units']} batch consume queue units")
        else:
            table.add(line["topic"], line["queueId"], line["msgBaseOffset"], line["batchSize"],
                      line["commitLogOffset"], line["size"], line["tagsCode"], output.utc_time(line["storeTimestamp"]),
                      line["file"], line["fileOffset"])


def _dledger(events, dump) -> None:
    as_json = dump.options.json
    table = None if as_json else output.TableStream("dledger entries", [
        ("file", {}), ("byte", {"justify": "right"}), ("pos", {"justify": "right"}), ("index", {"justify": "right"}),
        ("term", {"justify": "right"}), ("size", {"justify": "right"}), ("record", {"justify": "right"}),
        ("committed", {}), ("problems", {})])
    for event in events:
        what = event[0]
        if what == "entry":
            line = event[1]
            if table is None:
                output.emit_json(line)
            else:
                table.add(line["file"], line["fileOffset"], line["offset"], line["index"], line["term"], line["size"],
                          line["recordOffset"], "yes" if line["committed"] else "NO",
                          "; ".join(p["message"] for p in line.get("problems", [])))
        elif what == "blank":
            item = event[1]
            if table is None:
                output.emit_json({"type": "dledger_blank", "offset": item.offset, "size": item.total_size})
            else:
                table.add("", "", item.offset, "blank", "", item.total_size, "", "", "")
        elif what == "problem":
            _emit_problem(event[1], as_json)
        elif what == "entries_end":
            if table is not None:
                table.flush()
        elif what == "index_unit":
            if as_json:
                output.emit_json(event[1])
        elif as_json:
            output.emit_json({"type": "dledger_state", **event[1]})
            output.emit_json({"type": "summary", **event[2]})
        else:
            state, s = event[1], event[2]
            output.note(f"dledger {state['dledgerDir']}: term {state['currTerm']}, voted for {state['voteLeader']}, "
                        f"entries {state['ledgerBeginIndex']} .. {state['ledgerEndIndex']}, committed "
                        f"{state['committedIndex']} (pos {state['committedPos']}); {s['entries']} entries, "
                        f"{s['blanks']} blanks, {s['indexUnits']} index units, {s['uncommitted']} uncommitted, "
                        f"{s['problems']} problem(s)"
                        + (f"; stopped at offset {s['stoppedAt']} (--limit): the rest was not read"
                           if s.get("stoppedAt") is not None else ""))


RENDERERS = {
    "commitlog": _commitlog,
    "consumequeue": _consumequeue,
    "index": _index,
    "checkpoint": _checkpoint,
    "config": _config,
    "timerlog": timershow.timerlog,
    "timerwheel": timershow.timerwheel,
    "timercheck": timershow.timercheck,
    "timermetrics": timershow.timermetrics,
    "batchconsumequeue": _batchconsumequeue,
    "dledger": _dledger,
}
