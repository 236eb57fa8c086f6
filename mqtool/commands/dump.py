"""`mqtool dump STORE KIND` / `mqtool dump FILE`: the files as they are on disk.

dump shows every entry it finds, including what a broker's recovery would
drop, and marks each entry that fails a check.  Exit 1 when anything failed.
Which files each kind opens and how they are walked: mqtool/forensics/dumpkinds.py;
how each kind is shown: mqtool/cli/dumpview.py and timershow.py.
"""

from __future__ import annotations

from pathlib import Path

import click

from mqtool.cli import options, output, requires
from mqtool.cli import dumpview
from mqtool.errors import NotAStoreError, UsageError
from mqtool.forensics.dumpkinds import KINDS, Dump, DumpOptions, FileArgs, infer_kind
from mqtool.forensics.filters import Filters
from mqtool.storage.settings import open_layout


@click.command("dump")
@click.argument("target", metavar="STORE|FILE", type=click.Path(path_type=str))
@click.argument("kind", metavar="[KIND]", required=False, type=click.Choice(KINDS))
@options.config_option
@options.json_option
@options.filter_options
@click.option("--queue", "queues", multiple=True, type=int, help="Only this queue id (repeatable).")
@click.option("--offset-from", type=int, help="Only commitlog offsets >= this.")
@click.option("--offset-to", type=int, help="Only commitlog offsets < this.")
@click.option("--queue-offset-from", type=int, help="consumequeue: only queue offsets >= this.")
@click.option("--queue-offset-to", type=int, help="consumequeue: only queue offsets < this.")
@click.option("--limit", type=click.IntRange(min=0), help="Stop after this many entries.")
@options.body_options
@click.option("--no-crc", is_flag=True, help="Do not recompute body CRCs.")
@click.option("--slots", is_flag=True, help="index: also list the non-empty hash slots.")
@options.progress_option
@requires.run
def cli(run, target, kind, config_path, settings, as_json, topics, queues, offset_from, offset_to,
        queue_offset_from, queue_offset_to, since, until, limit, body_format, no_body, no_crc, slots,
        progress):
    """The entries of a store's files, as they are on disk.

    Each entry is marked when it fails a check.

    STORE is a store directory (then KIND is required) or one file of a store (KIND is
    inferred from its place, or given).  KIND is one of:

    \b
      commitlog          records (the messages), blanks, damage
      consumequeue       consume queue units
      index              index file headers, entries (--slots: hash slots)
      checkpoint         the store checkpoint
      config             the broker's JSON files in config/
      timerlog           5.x timer store: timer units
      timerwheel         5.x timer store: the wheel's written slots
      timercheck         5.x timer store: its checkpoint
      timermetrics       5.x timer store: timing counts per topic
      batchconsumequeue  5.x BatchCQ topics: batch consume queue units
      dledger            a DLedger store: its entries and index units
    """
    filters = Filters.from_options(topics, queues, since, until, offset_from, offset_to, queue_offset_from,
                                   queue_offset_to)
    path = Path(target)
    body = None if no_body else (body_format or ("base64" if as_json else "text"))
    dump_options = DumpOptions(filters, json=as_json, body=body, crc=not no_crc, progress=progress, slots=slots,
                               limit=limit)
    if path.is_file():
        kind = kind or infer_kind(path)
        dump = Dump(kind, dump_options, file=FileArgs(path, config_path, settings))
    else:
        if kind is None:
            if not path.exists():
                raise NotAStoreError("no such store directory or file", path=path)
            raise UsageError("give KIND after STORE: " + ", ".join(KINDS))
        layout = open_layout(target, config_path, settings)
        run.reading([layout])
        if kind in ("commitlog", "consumequeue", "batchconsumequeue"):   # (timer kinds filter on the real topic)
            _say_unknown_topics(layout, topics)
        dump = Dump(kind, dump_options, layout=layout)
    dumpview.render(dump)
    found = dump.problems_found()
    if found:
        raise found


def _say_unknown_topics(layout, topics) -> None:
    """--topic naming a topic the store has no queue of: said, so that an empty table is not a riddle."""
    if not topics:
        return
    from mqtool.storage import batchqueue

    known = {t for t, _, _ in layout.consume_queues()} | {t for t, _, _ in batchqueue.queues(layout)}
    for topic in topics:
        if topic not in known:
            shown = ", ".join(sorted(known)[:12]) + (", ..." if len(known) > 12 else "")
            output.note(f"note: the store has no queue of topic {topic}"
                        + (f" (its topics: {shown})" if known else " (it has no queues)"))
