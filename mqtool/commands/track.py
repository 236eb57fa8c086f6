"""`mqtool track STORE MSGID` / `mqtool track STORE --topic T --key K`: every record the broker wrote
for a message (retries, dead letters, delays, timers, transactions), the consumer groups' state at
each, and where the message is now (forensics/journey.py).

Exit 0 whether or not the message was found; 1 when a record on the way fails a check or the index
is damaged (the commitlog is scanned instead); 2 for a MSGID that is not 32 or 56 hex digits.
"""

from __future__ import annotations

import click

from mqtool.cli import journeyview, options, output, requires
from mqtool.cli import messageshow
from mqtool.errors import UsageError
from mqtool.forensics.journey import track
from mqtool.forensics.lookup import StoreReader
from mqtool.formats.msgid import decode_offset_msgid
from mqtool.storage.settings import open_layout

MSGID_SHAPE = ("a msgId is 32 hex digits (56 for an IPv6 host): the producer's msgId (UNIQ_KEY, as a send "
               "result shows it) or an offset msgId of one of the message's records")


@click.command("track")
@options.store_argument
@click.argument("msgid", required=False)
@click.option("--topic", help="With --key: the topic the producer sent the message to (a delayed message, a "
                              "timer or a transaction half is found under it too).")
@click.option("--key", help="With --topic: one of the message's KEYS, or its UNIQ_KEY.")
@click.option("--scan", is_flag=True, help="Walk the whole commitlog instead of using the index.")
@options.at_option
@options.config_option
@options.json_option
@options.progress_option
@requires.run
def cli(run, store, msgid, topic, key, scan, now_ms, config_path, settings, as_json, progress):
    """Where a message went: every hop, retry, delay and timer.

    Where a message went: every hop through retries, dead letters, delays, timers and transactions.

    MSGID is the producer's msgId (its UNIQ_KEY) or an offset msgId of any of its records; or give
    --topic and --key instead.  Each hop is a record the broker wrote for the message, in store
    order, with its role; each consumer group with offsets for a hop's queue has CONSUMED or
    NOT_CONSUME_YET there; the summary says where the message is now.
    """
    if (msgid is None) == (key is None) or (key is None) != (topic is None):
        raise UsageError("give MSGID, or --topic and --key (not both)")
    if msgid is not None:
        try:
            decode_offset_msgid(msgid)
        except ValueError as exc:
            raise UsageError(f"{exc}: {MSGID_SHAPE}") from None
    layout = open_layout(store, config_path, settings)
    run.reading([layout])
    with StoreReader(layout) as reader:
        total = sum(mf.file_size for mf in reader.commitlog.files)
        with output.progress(total, "scanning the commitlog", enabled=progress) as bar:
            start = reader.commitlog.min_offset
            result = track(reader, layout, now_ms, msgid=msgid, topic=topic, key=key, scan=scan,
                           progress=lambda offset: bar.update(offset - start))
        journeyview.show_track(result, as_json)
        journeyview.show_problems(result.problems, as_json)
        for note in journeyview.track_notes(result):
            output.note(note)
    bad = [hop for j in result.journeys for hop in j.hops if not hop.ok]
    messageshow.fail_on_problems(result.problems + reader.index_problems, bad)

