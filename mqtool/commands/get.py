"""`mqtool get STORE --topic T --queue Q --offset N`: messages by queue offset, read through
the consume queue as a broker's getMessage reads them.

Each unit's commitlog offset and size lead to a record, which must have the unit's size,
topic, queue and queue offset; a unit that disagrees is reported (exit 1).  An offset below
the queue's min or beyond its max is a usage error (exit 2) that names the valid range, as
a consumer would want to know; the max offset itself (where the next message will go) is an
empty answer (exit 0).
"""

from __future__ import annotations

import click

from mqtool.cli import options, requires
from mqtool.cli import messageshow
from mqtool.cli.messageshow import plural
from mqtool.errors import UsageError
from mqtool.forensics.lookup import Found, StoreReader
from mqtool.storage import batchqueue
from mqtool.storage.settings import open_layout


@click.command("get")
@options.store_argument
@click.option("--topic", required=True, help="The topic of the consume queue.")
@click.option("--queue", "queue_id", required=True, type=click.IntRange(min=0), help="The queue id.")
@click.option("--offset", "queue_offset", required=True, type=click.IntRange(min=0),
              help="The first queue offset to read.")
@click.option("--count", type=click.IntRange(min=1), default=1, show_default=True,
              help="How many consecutive queue offsets to read (fewer when the queue ends first).")
@options.config_option
@options.json_option
@options.body_options
@requires.run
def cli(run, store, topic, queue_id, queue_offset, count, config_path, settings, as_json, body_format, no_body):
    """Messages by queue offset, read through the consume queue.

    Messages at queue offsets N, N+1, ... of queue --queue of topic --topic.
    """
    layout = open_layout(store, config_path, settings)
    run.reading([layout])
    with StoreReader(layout) as reader:
        result = reader.get(topic, queue_id, queue_offset, count)
        name = f"{topic}/{queue_id}"
        if result.status == "NO_MATCHED_LOGIC_QUEUE":
            queues = [str(q) for t, q, _ in [*layout.consume_queues(), *batchqueue.queues(layout)] if t == topic]
            have = (f"topic {topic} has queues {', '.join(queues)}" if queues
                    else f"no queue of topic {topic} is on disk")
            raise UsageError(f"no consume queue {name} in this store ({have})")
        if result.status in ("OFFSET_TOO_SMALL", "OFFSET_OVERFLOW_BADLY"):
            if result.min_offset == result.max_offset:
                valid = f"{name} is empty (min and max offset {result.max_offset})"
            else:
                valid = (f"{name} holds queue offsets {result.min_offset} .. {result.max_offset - 1} "
                         f"(max offset {result.max_offset})")
            raise UsageError(f"--offset {queue_offset} is out of range: {valid}")
        show = messageshow.MessageOutput(f"{name} from queue offset {queue_offset}", as_json, body_format, no_body)
        for item in result.items:
            if isinstance(item, Found):
                show.message(item)
            else:
                show.problem(item)
        found = sum(1 for i in result.items if isinstance(i, Found))
        if result.status == "FOUND":
            notes = [f"{plural(found, 'message')} from queue offset {queue_offset}; next offset "
                     f"{result.next_offset} (the queue holds {result.min_offset} .. {result.max_offset - 1})"]
        else:
            notes = [f"no message at queue offset {queue_offset} yet: it is the queue's max offset, where "
                     "the next message will go"]
        if result.expired:
            notes.append(f"{plural(result.expired, 'unit')} of the queue point below the commitlog's first "
                         "file: their messages were deleted with it")
        show.finish(result.summary(), notes)
    messageshow.fail_on_problems(result.problems, [i for i in result.items if isinstance(i, Found) and not i.ok])
