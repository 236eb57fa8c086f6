"""`mqtool transactions STORE`: every transaction of the half topic, committed, rolled back or pending,
with the check's copies, the ops and where the check service stands (forensics/transactions.py).

Exit 0 when nothing is stuck; 1 when a transaction has been pending longer than the broker's
transactionTimeOut and transactionCheckInterval allow (settings from --config/--set), or a record on
the way fails a check: a cron job catches stuck transactions.
"""

from __future__ import annotations

import click

from mqtool.cli import journeyview, messageshow, options, output, requires
from mqtool.errors import ProblemsFound
from mqtool.storage.settings import duration
from mqtool.forensics.lookup import StoreReader
from mqtool.forensics.transactions import list_transactions, stuck_text
from mqtool.storage.settings import open_layout


@click.command("transactions")
@options.store_argument
@options.at_option
@options.config_option
@options.json_option
@requires.run
def cli(run, store, now_ms, config_path, settings, as_json):
    """Every transaction: committed, rolled back or pending.

    Every transaction: COMMITTED, ROLLED_BACK or PENDING, its check copies and ops.

    Read from the half and op queues (RMQ_SYS_TRANS_HALF_TOPIC, RMQ_SYS_TRANS_OP_HALF_TOPIC), with the
    committed copies found through the index.  A transaction pending longer than transactionTimeOut +
    transactionCheckInterval is stuck (exit 1).
    """
    layout = open_layout(store, config_path, settings)
    run.reading([layout])
    with StoreReader(layout) as reader:
        report = list_transactions(reader, layout, now_ms)
    journeyview.show_transactions(report, as_json)
    for note in journeyview.transaction_notes(report):
        output.note(note)
    messageshow.fail_on_problems(report.problems, [])
    if report.stuck:
        raise ProblemsFound(f"{len(report.stuck)} transaction(s) stuck: {stuck_text(report.stuck[0])}, more than "
                            f"{duration(report.timeout_ms)} (transactionTimeOut + transactionCheckInterval)")
