"""How `track` and `transactions` print what they found: a table a person reads at a glance, or
JSON lines with stable field names."""

from __future__ import annotations

from mqtool.cli import output
from mqtool.cli.messageshow import plural
from mqtool.storage.settings import duration

_MARK = {"CONSUMED": "consumed", "NOT_CONSUME_YET": "not yet"}


def _consumption_cell(hop) -> str:
    return ", ".join(f"{c['group']}: {_MARK[c['state']]}" for c in hop.consumption)


def show_track(result, as_json: bool) -> None:
    """Per message: its hops, then each group's consumption of each hop, then where it is now."""
    for journey in result.journeys:
        if as_json:
            for hop in journey.hops:
                output.emit_json(hop.to_json())
            for hop in journey.hops:
                for row in hop.consumption:
                    output.emit_json(row)
            output.emit_json(journey.summary(result.source))
            continue
        if journey.hops:
            table = output.TableStream(f"message {journey.uniq_key or '(no UNIQ_KEY)'} sent to {journey.topic}", [
                ("#", {"justify": "right"}), ("role", {"no_wrap": True}), ("group", {}), ("topic", {}),
                ("queue", {"justify": "right"}), ("q-offset", {"justify": "right"}),
                ("offset", {"justify": "right"}), ("store time (UTC)", {"no_wrap": True}),
                ("due (UTC)", {"no_wrap": True}), ("consumers", {}), ("check", {})])
            for n, hop in enumerate(journey.hops, 1):
                r = hop.record
                table.add(n, hop.role, hop.group or "", r.topic, r.queue_id, r.queue_offset, r.offset,
                          output.utc_time(r.store_timestamp), output.utc_time(hop.due_at) if hop.due_at else "",
                          _consumption_cell(hop), "ok" if hop.ok else ", ".join(k for k, _ in hop.problems))
            table.flush()
        output.stdout().print(f"where: {output.printable(journey.where)}", highlight=False, markup=False)
        for op in journey.ops:
            output.stdout().print(f"  op at {op.queue_id}/{op.queue_offset} (offset {op.commitlog_offset}) names "
                                  f"half queue offsets {', '.join(map(str, op.half_offsets))}",
                                  highlight=False, markup=False)
        for gone in journey.deleted:
            output.stdout().print(f"  deleted: a record in {output.printable(gone['topic'])} at offset "
                                  f"{gone['commitLogOffset']} (its commitlog file is gone)", highlight=False, markup=False)


def track_notes(result) -> list[str]:
    notes = []
    if result.note:
        notes.append(f"{result.note}: the whole commitlog was scanned")
    found = [j for j in result.journeys if j.hops]
    if not found:
        span = result.index_span
        covers = (f"; the index covers store times {output.utc_time(span[0])} .. {output.utc_time(span[1])}"
                  if span and result.source == "index" else "")
        notes.append(f"{result.looked_up}: not found{covers}")
    else:
        notes.append(f"{plural(len(found), 'message')}, {plural(sum(len(j.hops) for j in found), 'hop')} "
                     f"({result.source})")
    return notes


def show_transactions(report, as_json: bool) -> None:
    if as_json:
        for t in report.transactions:
            output.emit_json(t.to_json())
        for row in report.by_topic():
            output.emit_json(row)
        for check in report.checks:
            output.emit_json(check.to_json())
        show_problems(report.problems, as_json)
        output.emit_json(report.summary())
        return
    table = output.TableStream("transactions (RMQ_SYS_TRANS_HALF_TOPIC)", [
        ("uniqKey", {"no_wrap": True}), ("keys", {}), ("producer group", {}), ("topic", {}),
        ("queue", {"justify": "right"}), ("state", {"no_wrap": True}), ("checks", {"justify": "right"}),
        ("copies", {"justify": "right"}), ("first stored (UTC)", {"no_wrap": True}), ("note", {})])
    for t in report.transactions:
        j = t.to_json()
        note = []
        if t.op_missing:
            note.append("op missing: the check will ask again")
        if t.waited_ms is not None:
            note.append(f"waiting {duration(t.waited_ms)}" + (" — stuck" if t.stuck else ""))
        table.add(j["uniqKey"] or "", j["keys"] or "", j["producerGroup"] or "", j["topic"] or "", j["queueId"],
                  t.state, t.check_times, len(t.halves), output.utc_time(t.first.store_timestamp), "; ".join(note))
    table.flush()
    topics = output.TableStream("per topic", [("topic", {}), ("committed", {"justify": "right"}),
                                              ("rolled back", {"justify": "right"}), ("pending", {"justify": "right"}),
                                              ("op missing", {"justify": "right"}), ("stuck", {"justify": "right"})])
    for row in report.by_topic():
        topics.add(row["topic"], row["COMMITTED"], row["ROLLED_BACK"], row["PENDING"], row["opMissing"], row["stuck"])
    topics.flush()
    for check in report.checks:
        output.stdout().print(
            f"check (CID_RMQ_SYS_TRANS) in queue {check.queue_id}: half offset {_offset(check.half_offset)} of "
            f"{check.half_max}, op offset {_offset(check.op_offset)} of {check.op_max}", highlight=False, markup=False)
    show_problems(report.problems, as_json)


def show_problems(problems, as_json: bool) -> None:
    """What could not be read on the way: `{"type":"problem"}` lines, or a line each."""
    for problem in problems:
        if as_json:
            output.emit_json(problem.to_json())
        else:
            output.stdout().print(f"problem {problem.kind}: {problem.path}: {output.printable(problem.message)}",
                                  highlight=False, markup=False)


def _offset(value) -> str:
    return "never committed" if value is None else str(value)


def transaction_notes(report) -> list[str]:
    notes = [f"{plural(len(report.transactions), 'transaction')}, {plural(report.ops, 'op')} "
             f"(committed copies found through the {report.source})"]
    if report.note:
        notes.append(report.note)
    if report.unmatched_ops:
        notes.append(f"{plural(len(report.unmatched_ops), 'half queue offset')} named by ops hold no half read "
                     "(deleted, or below the queue's min offset)")
    if report.stuck:
        notes.append(f"{plural(len(report.stuck), 'transaction')} pending longer than transactionTimeOut + "
                     f"transactionCheckInterval ({duration(report.timeout_ms)})")
    return notes
