"""`mqtool lookup-by-id STORE MSGID`: the message an offset message id names, else (or with
--uniq) the message whose UNIQ_KEY it is.

An offset message id is the store host (address and port) and the commitlog offset of the
record, so it is read directly; its store host is compared with the record's.  A UNIQ_KEY
(the id a producer's send result shows) says nothing about where the message is: with
--topic it is looked up through the index, without it the whole commitlog is scanned.
Exit 0 found or not, 1 when the record found fails a check, 2 for an id that is not 32 or 56
hex digits.
"""

from __future__ import annotations

import click

from mqtool.cli import options, output, requires
from mqtool.cli import messageshow
from mqtool.cli.messageshow import plural
from mqtool.errors import UsageError
from mqtool.forensics.lookup import StoreReader
from mqtool.formats.commitlog import Record
from mqtool.formats.msgid import decode_offset_msgid
from mqtool.storage.settings import open_layout


@click.command("lookup-by-id")
@options.store_argument
@click.argument("msgid")
@click.option("--uniq", is_flag=True,
              help="MSGID is a UNIQ_KEY (the producer's msgId), not an offset message id.")
@click.option("--topic", help="Look a UNIQ_KEY up through the index under this topic; without it "
                              "the whole commitlog is scanned (slow on a large store).")
@options.config_option
@options.json_option
@options.body_options
@options.progress_option
@requires.run
def cli(run, store, msgid, uniq, topic, config_path, settings, as_json, body_format, no_body, progress):
    """The message an offset message id or a UNIQ_KEY names.

    The message with offset message id MSGID (32 hex digits, 56 for an IPv6 store host).

    When no record of this store starts at the id's offset, or with --uniq, MSGID is taken
    as a UNIQ_KEY instead.
    """
    try:
        offset_id = decode_offset_msgid(msgid)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    msgid = msgid.strip().upper()
    layout = open_layout(store, config_path, settings)
    run.reading([layout])
    show = messageshow.MessageOutput(msgid, as_json, body_format, no_body, detail=True)
    notes: list[str] = []
    with StoreReader(layout) as reader:
        if not uniq:
            entry = reader.record_at(offset_id.commitlog_offset)
            if isinstance(entry, Record):
                matches = (entry.store_address, entry.store_port) == \
                    (offset_id.store_address, offset_id.store_port)
                found = reader.found(entry, lookedUpAs="offsetMsgId", idStoreHost=offset_id.store_host,
                                     storeHostMatches=matches)
                if not matches:
                    notes.append(f"warning: the record at offset {entry.offset} was stored by "
                                 f"{entry.store_host}, the id names {offset_id.store_host}: the id may "
                                 "belong to another broker")
                show.message(found)
                show.finish({"type": "summary", "msgId": msgid, "source": "offset", "found": 1,
                             "problems": 0 if found.ok else 1}, notes)
                messageshow.fail_on_problems([], [found] if not found.ok else [])
                return
            output.note(f"{msgid} is not an offset message id of this store ({entry.message}); "
                        "looking it up as a UNIQ_KEY")
        if topic is not None and reader.index_files():
            result = reader.by_key(topic, msgid)
        else:
            why = "no index files" if topic is not None else "give --topic to use the index"
            output.note(f"scanning the whole commitlog for UNIQ_KEY {msgid} ({why})")
            total = sum(mf.file_size for mf in reader.commitlog.files)
            with output.progress(total, "scanning the commitlog", enabled=progress) as bar:
                start = reader.commitlog.min_offset
                result = reader.scan(topic, msgid, uniq_only=True,
                                     progress=lambda offset: bar.update(offset - start))
        messages = [m for m in result.messages if m.extra.get("matchedBy") == "UNIQ_KEY"]
        for found in messages:
            found.extra["lookedUpAs"] = "uniqKey"
            show.message(found)
        for problem in result.problems:
            show.problem(problem)
        notes.append(f"{plural(len(messages), 'message')} with UNIQ_KEY {msgid} found ({result.source})")
        summary = {"type": "summary", "msgId": msgid, "source": result.source, "topic": topic,
                   "found": len(messages), "problems": len(result.problems) + sum(not m.ok for m in messages)}
        if result.source == "index":
            summary["dropped"] = result.dropped + len(result.messages) - len(messages)
        show.finish(summary, notes)
    messageshow.fail_on_problems(result.problems, [m for m in messages if not m.ok])
