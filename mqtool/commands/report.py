"""`mqtool report STORE -o report.html`: one self-contained HTML page with charts and their tables
(gathered by mqtool/pipeline/report.py, drawn by mqtool/cli/reportpage.py with matplotlib).

Exit 0 when the page is written; 1 when it was written and shows problems (damage, offsets out of
range, unreadable offsets files); 2 when matplotlib (the `report` extra) is missing.
"""

from __future__ import annotations

import click

from mqtool.cli import metrics, options, output, reportpage, requires
from mqtool.errors import ProblemsFound
from mqtool.pipeline import report
from mqtool.storage.settings import open_layout


@click.command("report")
@options.store_argument
@options.config_option
@options.json_option
@click.option("--output", "-o", "out", required=True, metavar="FILE", type=click.Path(dir_okay=False, path_type=str),
              help="The HTML file to write (replaced whole, through a temporary file).")
@options.jobs_option("Read the commitlog's files in this many processes")
@requires.run
def cli(run, store, config_path, settings, as_json, out, jobs):
    """A forensic HTML report with charts.

    Its pictures: commitlog map, messages and bytes per hour, sizes, consumer lag,
    timer backlog, retries and dead letters, transactions, and the disk against the broker's levels
    with what the next clean would cost."""
    reportpage.check()
    run.reading([open_layout(store, config_path, settings)])
    data = report.gather(store, config_path, settings, jobs=jobs)
    page = reportpage.render(data)
    metrics.replace_file(out, page.encode("utf-8"), "--output")
    problems = len(data["problems"]) + len(data["lag"]["problems"]) + data["stats"]["problems"]
    summary = {"type": "report", "file": out, "bytes": len(page.encode("utf-8")), "charts": len(reportpage.CHARTS),
               "problems": problems, "seconds": data["seconds"]}
    if as_json:
        output.emit_json(summary)
    else:
        output.note(f"wrote {out} ({summary['bytes']:,} bytes, {summary['charts']} charts); {problems} problem(s)")
    if problems:
        raise ProblemsFound(f"the report shows {problems} problem(s); see its Problems section")
