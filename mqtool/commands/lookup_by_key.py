"""`mqtool lookup-by-key STORE --topic T KEY`: messages by key, found as the broker's
queryMessage finds them and re-checked against the commitlog; --scan walks the commitlog
instead of the index.

Exit 0 whether or not anything was found; 1 when an index entry points at bytes that are not
a record, a found record fails a check, or (without --scan) the index is missing or damaged.
"""

from __future__ import annotations

import click

from mqtool.cli import options, output, requires
from mqtool.cli import messageshow
from mqtool.cli.messageshow import plural
from mqtool.errors import ProblemsFound, UsageError
from mqtool.forensics.lookup import LONG_MAX, MAX_MSGS_NUM_BATCH, StoreReader
from mqtool.storage.settings import open_layout, parse_time


def time_window(since, until, begin=None, end=None) -> tuple[int, int]:
    """The store times to look in, first and last inclusive (the broker's queryMessage's begin and
    end): --since and --until (exclusive), or the deprecated --begin and --end (inclusive)."""
    for new, old in (("--since", begin), ("--until", end)):
        if old is not None and (since if new == "--since" else until) is not None:
            raise UsageError(f"{new} and its old name {'--begin' if new == '--since' else '--end'}: give one")
    first = parse_time(since, "--since") if since is not None else parse_time(begin, "--begin")
    if until is not None:
        last = parse_time(until, "--until") - 1
    else:
        last = parse_time(end, "--end")
    first = 0 if first is None else first
    last = LONG_MAX if last is None else last
    if first > last:
        raise UsageError(f"--since ({first}) is not before --until ({last + 1})")
    return first, last


@click.command("lookup-by-key")
@options.store_argument
@click.argument("key")
@click.option("--topic", required=True,
              help="The topic the message is stored under (a delayed message: SCHEDULE_TOPIC_XXXX; "
                   "a transaction half message: RMQ_SYS_TRANS_HALF_TOPIC).")
@options.time_options
@click.option("--limit", "max_num", type=click.IntRange(min=1), default=MAX_MSGS_NUM_BATCH, show_default=True,
              help="At most this many index hits, the newest (a broker's queryMessage never returns "
                   "more than maxMsgsNumBatch = 64; mqtool allows more for forensics).")
@options.deprecated_alias("--begin", "--since", "begin", metavar="TIME")
@options.deprecated_alias("--end", "--until (which is exclusive)", "end", metavar="TIME")
@options.deprecated_alias("--max", "--limit", "old_max", type=click.IntRange(min=1))
@click.option("--scan", is_flag=True,
              help="Walk the whole commitlog instead of using the index (for a missing or damaged "
                   "index; reads every record).")
@options.config_option
@options.json_option
@options.body_options
@options.progress_option
@requires.run
def cli(run, store, key, topic, since, until, max_num, begin, end, old_max, scan, config_path, settings, as_json,
        body_format, no_body, progress):
    """Messages by key (KEYS or UNIQ_KEY) in a topic.

    Messages whose KEYS or UNIQ_KEY hold KEY, in topic --topic.

    KEY is one of a message's KEYS (space-separated in the message, each indexed on its own)
    or its UNIQ_KEY, the msgId a producer's send result shows, so a client's msgId is
    looked up here too. Every index hit is re-checked against the commitlog: hits of
    another key or topic with the same hash are dropped (and counted), the same offset
    found twice is listed once.  The index keeps store times to the second.
    """
    first, last = time_window(since, until, begin, end)
    if old_max is not None:
        max_num = old_max
    layout = open_layout(store, config_path, settings)
    run.reading([layout])
    with StoreReader(layout) as reader:
        if scan:
            total = sum(mf.file_size for mf in reader.commitlog.files)
            with output.progress(total, "scanning the commitlog", enabled=progress) as bar:
                start = reader.commitlog.min_offset
                result = reader.scan(topic, key, max_num=max_num, begin=first, end=last,
                                     progress=lambda offset: bar.update(offset - start))
        else:
            result = reader.by_key(topic, key, max_num=max_num, begin=first, end=last)
        show = messageshow.MessageOutput(f"{topic} / {key}", as_json, body_format, no_body)
        for found in result.messages:
            show.message(found)
        for problem in result.problems:
            show.problem(problem)
        missing_index = not scan and not result.index_files and not result.problems
        summary = result.summary()
        if missing_index:
            summary["problems"] = 1
        show.finish(summary, _notes(result, max_num))
    if missing_index:
        raise ProblemsFound(f"no index files in {layout.index_dir}: the key cannot be looked up through "
                            "the index (use --scan to search the commitlog)")
    messageshow.fail_on_problems(result.problems, [m for m in result.messages if not m.ok])


def _notes(result, max_num: int) -> list[str]:
    notes = [f"{plural(len(result.messages), 'message')} found ({result.source})"]
    if result.dropped:
        notes.append(f"{plural(result.dropped, 'index hit')} dropped: the record there belongs to another "
                     "key or topic with the same hash (a hash collision)")
    if result.duplicates:
        notes.append(f"{result.duplicates} duplicate index {'entry' if result.duplicates == 1 else 'entries'} "
                     "(the same offset again) listed once")
    if result.expired:
        notes.append(f"{plural(result.expired, 'index hit')} {'points' if result.expired == 1 else 'point'} "
                     "below the commitlog's first file (deleted messages)")
    if result.source == "scan" and result.hits > max_num:
        notes.append(f"kept the newest {max_num} of {result.hits} matches (--limit {max_num})")
    elif result.source == "index" and result.hits >= max_num:
        notes.append(f"stopped at --limit {max_num} index hits: older matches may exist")
    if result.source == "index" and result.problems:
        notes.append("the index or the offsets it holds are damaged: --scan searches the commitlog instead")
    return notes
