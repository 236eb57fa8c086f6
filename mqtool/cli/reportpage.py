"""`mqtool report`'s page: one self-contained HTML file (no script, no fetched font, style or image),
its charts drawn now by matplotlib's SVG backend and put in the page inline, each with a table of
its numbers under it.  The numbers are pipeline/report.py's; this module only draws and writes.
"""

from __future__ import annotations

import html
import io
import math

import humanize

from mqtool.cli import output
from mqtool.errors import UsageError
from mqtool.storage.settings import duration
from mqtool.formats.topicnames import SYSTEM_GROUPS, is_system_group

TABLE_ROWS = 500          # rows of a table before "... and N more"
TOP_TOPICS = 8            # topics drawn on their own in the per-hour charts; the rest are "other topics"
TOP_GROUPS = 30
PROBLEMS_SHOWN = 20
PALETTE = ["#4C78A8", "#F58518", "#54A24B", "#B279A2", "#72B7B2", "#EECA3B", "#FF9DA6", "#9D755D", "#BAB0AC"]
BLUE, BLUE2, ORANGE, RED, GREY, DARK = "#4C78A8", "#9ECAE9", "#F58518", "#D62728", "#9D9D9D", "#333333"


def check() -> None:
    """matplotlib is there (the `report` extra), before anything is read."""
    _plt()


def _plt():
    try:
        import matplotlib
    except ImportError:
        raise UsageError("mqtool report draws its charts with matplotlib: pip install 'mqtool[report]'") from None
    matplotlib.use("svg", force=True)
    import matplotlib.pyplot as plt

    plt.rcParams.update({"svg.fonttype": "path", "text.parse_math": False, "font.size": 9, "axes.spines.top": False,
                         "axes.spines.right": False, "axes.grid": True, "grid.color": "#e5e5e5",
                         "grid.linewidth": 0.6, "axes.axisbelow": True, "axes.edgecolor": "#888888",
                         "axes.titleweight": "bold", "axes.titlesize": 10, "legend.frameon": False,
                         "figure.dpi": 96, "savefig.bbox": "tight"})
    return plt


def _svg(plt, fig, name: str) -> str:
    """The figure as inline SVG markup (its ids salted by its name, so two charts never share one)."""
    buf = io.StringIO()
    with plt.rc_context({"svg.hashsalt": name}):
        fig.savefig(buf, format="svg", metadata={"Date": None})
    plt.close(fig)
    text = buf.getvalue()
    return text[text.index("<svg"):]


# ---------------------------------------------------------------------- formatting

def _size(n) -> str:
    return "-" if n is None else humanize.naturalsize(n, binary=True)


def _int(n) -> str:
    return "-" if n is None else f"{n:,}"


def _time(ms) -> str:
    return output.utc_time(ms)


def _hour(hour: int) -> str:
    return _time(hour * 3_600_000)[:13] + ":00"


def _pct(ratio) -> str:
    return "-" if ratio is None or ratio < 0 else f"{ratio * 100:.1f} %"


def binary_ticks(vmin: float, vmax: float, bins: int = 6) -> list[int]:
    """Ticks for a byte axis at round binary values: the multiples of a power of two (the
    smallest step giving at most `bins` steps), so labels read 8 KiB, 16 KiB, 24 KiB or
    512 MiB, 1 GiB, 1.5 GiB, never 9.77 KiB."""
    step = 1 << max(0, math.ceil(math.log2(max(vmax - vmin, 1) / bins)))
    return [n * step for n in range(math.ceil(vmin / step), math.floor(vmax / step) + 1)]


def binary_labels(ticks) -> list[str]:
    """Labels of binary_ticks, exact, all in the unit of their step (1536 MiB, not 1.5 GiB next
    to 1 GiB; 1088 KiB, not 1.062 MiB)."""
    step = min((b - a for a, b in zip(ticks, ticks[1:])), default=max(ticks[0] if ticks else 1, 1)) or 1
    power = min(int(math.log(step, 1024)), len(BINARY_UNITS) - 1)
    return [f"{int(t) >> (10 * power):,} {BINARY_UNITS[power]}" for t in ticks]


BINARY_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB")


def _bytes_axis(ax, axis="x") -> None:
    from matplotlib.ticker import Formatter, Locator

    class BinaryLocator(Locator):
        def __call__(self):
            return self.tick_values(*self.axis.get_view_interval())

        def tick_values(self, vmin, vmax):
            return binary_ticks(min(vmin, vmax), max(vmin, vmax))

    class BinaryFormatter(Formatter):
        def format_ticks(self, values):
            return binary_labels(list(values))

        def __call__(self, x, pos=None):
            return binary_labels([x])[0]

    target = ax.xaxis if axis == "x" else ax.yaxis
    target.set_major_locator(BinaryLocator())
    target.set_major_formatter(BinaryFormatter())


def _hours_axis(ax, hours) -> None:
    """Dates on the x axis, with an hour of room either side (one hour alone is a readable bar);
    ticks on whole hours (every 1, 2, 3, 4, 6 or 12 of them), on days beyond ten days."""
    import matplotlib.dates as mdates
    import numpy as np

    first, last = min(hours), max(hours)
    ax.set_xlim(np.datetime64((first - 1) * 3600, "s"), np.datetime64((last + 2) * 3600, "s"))
    span = last - first + 3
    if span <= 240:
        every = next(n for n in (1, 2, 3, 4, 6, 12, 24) if span / n <= 12)
        locator = mdates.HourLocator(byhour=range(0, 24, every))
    else:
        locator = mdates.AutoDateLocator(minticks=3, maxticks=12, interval_multiples=True)
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))


def _table(columns, rows, *, numeric=()) -> str:
    rows = list(rows)
    head = "".join(f"<th{' class=num' if i in numeric else ''}>{html.escape(c)}</th>" for i, c in enumerate(columns))
    body = []
    for row in rows[:TABLE_ROWS]:
        body.append("<tr>" + "".join(f"<td{' class=num' if i in numeric else ''}>{html.escape(str(v))}</td>"
                                     for i, v in enumerate(row)) + "</tr>")
    more = (f"<p class=more>... and {len(rows) - TABLE_ROWS:,} more rows (mqtool's --json commands list them "
            "all)</p>") if len(rows) > TABLE_ROWS else ""
    if not rows:
        return "<p class=empty>nothing to list</p>"
    return f"<div class=tablewrap><table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table></div>{more}"


def _nothing(text: str, tables: str = "") -> tuple:
    """A chart with nothing to draw: no figure (a blank card says nothing), one line saying why,
    and the tables there still are."""
    return None, tables, text


# ---------------------------------------------------------------------- the charts

def _commitlog_map(plt, data) -> tuple[str, str]:
    cl, stats, recover, clean = data["commitlog"], data["stats"], data["recover"], data["clean"]
    files = [f for f in cl["files"] if f["start"] is not None]
    fig, ax = plt.subplots(figsize=(10, 3.2))
    rows = ["commitlog files", "damage", "recover cuts", "next clean deletes", "in the trash", "quarantined"]
    y = {name: len(rows) - 1 - i for i, name in enumerate(rows)}
    low = min([f["start"] for f in files] + [t["startOffset"] for t in data["trash"]
                                              if t["kind"] == "commitlog" and t["startOffset"] is not None]
              or [0])
    high = max([cl["end"]] + [(t["startOffset"] or 0) + t["size"] for t in data["trash"] if t["kind"] == "commitlog"])
    span = max(high - low, 1)
    least = span * 0.004     # what is drawn at least, so a one-record damage shows

    def bars(row, spans, color, **kw):
        if spans:
            ax.broken_barh([(s, max(n, least)) for s, n in spans], (y[row] - 0.35, 0.7), facecolors=color, **kw)

    bars("commitlog files", [(f["start"], f["size"]) for f in files],
         [BLUE if i % 2 == 0 else BLUE2 for i in range(len(files))], edgecolor="white", linewidth=0.5)
    bars("damage", [(d["offset"], d["bytes"]) for d in stats["damage"]], RED)
    cut_label = "nothing"
    if recover and recover["dataEnd"] > recover["cut"]:
        bars("recover cuts", [(recover["cut"], recover["dataEnd"] - recover["cut"])], RED, hatch="///",
             edgecolor="white")
        cut_label = f"{_size(recover['dataEnd'] - recover['cut'])} from {recover['cut']:,}"
    gone = [(d["startOffset"], d["size"]) for d in (clean or {}).get("decisions", [])
            if d["kind"] == "commitlog" and d["startOffset"] is not None]
    bars("next clean deletes", gone, ORANGE, edgecolor="white", linewidth=0.5)
    bars("in the trash", [(t["startOffset"], t["size"]) for t in data["trash"]
                          if t["kind"] == "commitlog" and t["startOffset"] is not None], GREY)
    bars("quarantined", [(r["offset"], r["bytes"]) for q in data["quarantine"] for r in q["commitlogRanges"]],
         PALETTE[3])
    ax.set_yticks(list(y.values()), list(y.keys()))
    ax.set_ylim(-0.6, len(rows) - 0.4)
    ax.set_xlim(low, low + span * 1.01)
    _bytes_axis(ax)
    ax.set_xlabel("commitlog offset")
    ax.grid(axis="y", visible=False)
    ax.set_title(f"{len(files)} commitlog files, offsets {low:,} .. {cl['end']:,}; {len(stats['damage'])} damaged "
                 f"place(s); recover cuts {cut_label}; next clean deletes {len(gone)} file(s)", loc="left")
    fig.tight_layout()
    damage_at = {}
    for d in stats["damage"]:
        for f in files:
            if f["start"] <= d["offset"] < f["start"] + f["size"]:
                damage_at[f["name"]] = damage_at.get(f["name"], 0) + 1
    going = {s for s, _ in gone}
    rows_out = []
    for f in files:
        state = []
        if f["start"] in going:
            state.append("next clean deletes it")
        if damage_at.get(f["name"]):
            state.append(f"{damage_at[f['name']]} damaged place(s)")
        if recover and f["start"] <= recover["cut"] < f["start"] + f["size"] and recover["dataEnd"] > recover["cut"]:
            state.append(f"recover cuts from {recover['cut']:,}")
        if recover and f["name"] in recover["removedFiles"]:
            state.append("recover removes it")
        rows_out.append((f["name"], _int(f["start"]), _int(f["start"] + f["size"]), _size(f["size"]),
                         _time(f["mtime"]), "; ".join(state) or "ok"))
    table = _table(["file", "first offset", "end offset", "size", "last modified", "state"], rows_out, numeric=(1, 2, 3))
    damage = _table(["commitlog offset", "bytes", "kind"],
                    [(_int(d["offset"]), _int(d["bytes"]), d["kind"]) for d in stats["damage"]], numeric=(0, 1))
    trash = _table(["file", "kind", "size", "staged", "removed at", "why"],
                   [(t["path"], t["kind"], _size(t["size"]), _time(t["stagedAt"]), _time(t["dueAt"]), t["reason"])
                    for t in data["trash"]], numeric=(2,))
    quarantine = _table(["quarantine run", "files", "bytes", "commitlog ranges kept"],
                        [(q["name"], _int(q["files"]), _size(q["bytes"]),
                          "; ".join(f"{r['offset']:,} +{r['bytes']:,} ({r['reason']})" for r in q["commitlogRanges"])
                          or "-") for q in data["quarantine"]], numeric=(1, 2))
    tables = (table + "<h3>Damaged places</h3>" + damage + "<h3>Trash (staged by clean)</h3>" + trash
              + "<h3>Quarantine (kept by recover and the writers)</h3>" + quarantine)
    return _svg(plt, fig, "commitlog-map"), tables


def _per_hour(plt, data) -> tuple[str, str]:
    import numpy as np

    topics = data["stats"]["topics"]
    ranked = sorted(topics, key=lambda t: -topics[t]["messages"])
    shown, rest = ranked[:TOP_TOPICS], ranked[TOP_TOPICS:]
    hours = sorted({h for t in topics.values() for h in t["hours"]})
    if not hours:
        return _nothing("no messages")
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(10, 5), sharex=True)
    x = np.array([h * 3600 for h in hours], dtype="datetime64[s]")
    width = np.timedelta64(3600, "s")       # a bar covers its whole hour
    series = [(name, [name]) for name in shown] + ([("other topics", rest)] if rest else [])
    for ax, field, label in ((top, "hours", "messages"), (bottom, "hourBytes", "bytes")):
        base = np.zeros(len(hours))
        for i, (name, members) in enumerate(series):
            values = np.array([sum(topics[m][field].get(h, 0) for m in members) for h in hours], dtype=float)
            ax.bar(x, values, width, bottom=base, label=name, color=PALETTE[i % len(PALETTE)], align="edge")
            base += values
        ax.set_ylabel(f"{label} per hour")
    _bytes_axis(bottom, "y")
    _hours_axis(bottom, hours)
    top.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
    top.set_title(f"messages and bytes per hour (UTC), by topic: {len(topics)} topic(s), {len(hours)} hour(s)",
                  loc="left")
    fig.tight_layout()
    rows = [(_hour(h), t, _int(topics[t]["hours"][h]), _size(topics[t]["hourBytes"].get(h, 0)))
            for h in hours for t in ranked if h in topics[t]["hours"]]
    return _svg(plt, fig, "per-hour"), _table(["hour (UTC)", "topic", "messages", "bytes"], rows, numeric=(2, 3))


def _sizes(plt, data) -> tuple[str, str]:
    hist = {int(k): v for k, v in data["stats"]["sizeHistogram"].items()}
    if not hist:
        return _nothing("no messages")
    bucket = min(hist)      # every power of two from the smallest to the largest, empty ones too: even spacing
    while bucket < max(hist):
        bucket *= 2
        hist.setdefault(bucket, 0)
    fig, ax = plt.subplots(figsize=(10, 2.8))
    total = sum(hist.values())
    labels = [f"≤ {humanize.naturalsize(b, binary=True, format='%.0f')}" for b in sorted(hist)]
    ax.bar(range(len(hist)), [hist[b] for b in sorted(hist)], color=BLUE, width=0.7)
    ax.set_xticks(range(len(hist)), labels)
    ax.set_ylabel("records")
    ax.set_title(f"record sizes (storeSize, powers of two): {total:,} records", loc="left")
    ax.grid(axis="x", visible=False)
    fig.tight_layout()
    rows = [(f"≤ {_size(b)}", _int(n), f"{100 * n / total:.2f}") for b, n in sorted(hist.items())]
    return _svg(plt, fig, "sizes"), _table(["size", "records", "%"], rows, numeric=(1, 2))


def _lag(plt, data) -> tuple[str, str]:
    groups = data["lag"]["groups"]
    ranked = sorted(groups, key=lambda g: (-g["lagMessages"], g["group"]))[:TOP_GROUPS]
    if not ranked:
        return _nothing("no consumer offsets (config/consumerOffset.json): nobody has consumed yet",
                        _delay_table(data["lag"]["delays"]))
    fig, ax = plt.subplots(figsize=(10, max(2.2, 0.28 * len(ranked) + 1.0)))
    names = [_group_name(g["group"], short=True) for g in ranked][::-1]
    values = [g["lagMessages"] for g in ranked][::-1]
    colors = [RED if g["outOfRange"] else GREY if is_system_group(g["group"]) else BLUE for g in ranked][::-1]
    ax.barh(range(len(ranked)), values, color=colors, height=0.65)
    ax.set_yticks(range(len(ranked)), names)
    for i, g in enumerate(ranked[::-1]):
        ax.text(g["lagMessages"], i, f"  {_size(g['lagBytes'])}", va="center", fontsize=8, color=DARK)
    ax.set_xlabel("messages not consumed yet")
    ax.grid(axis="y", visible=False)
    out = sum(1 for g in groups if g["outOfRange"])
    ax.set_title(f"lag per consumer group ({len(groups)} group(s)"
                 + (f"; the {TOP_GROUPS} most behind" if len(groups) > TOP_GROUPS else "")
                 + (f"; red: {out} with offsets out of range" if out else "") + ")", loc="left")
    ax.margins(x=0.15)
    fig.tight_layout()
    rows = [(_group_name(g["group"]), _int(g["topics"]), _int(g["queues"]), _int(g["lagMessages"]),
             _size(g["lagBytes"]), _time(g["oldestUnconsumedTimestamp"]), _int(g["outOfRange"]),
             _int(g["skippedMessages"]), _int(g["neverCommitted"]))
            for g in sorted(groups, key=lambda g: (-g["lagMessages"], g["group"]))]
    table = _table(["group", "topics", "queues", "lag (messages)", "lag (bytes)", "oldest unconsumed",
                    "out of range", "skipped (deleted unread)", "queues never committed"], rows,
                   numeric=(1, 2, 3, 4, 6, 7, 8))
    return _svg(plt, fig, "lag"), table + _delay_table(data["lag"]["delays"])


def _group_name(group: str, short: bool = False) -> str:
    """A group as the page names it: the broker's own groups marked as the system's."""
    if not is_system_group(group):
        return group
    return f"{group} (system)" if short else f"{group} (the broker's own: {SYSTEM_GROUPS.get(group, 'a system group')})"


def _delay_table(delays) -> str:
    if not delays:
        return ""
    return "<h3>Delay levels (delayOffset.json: the delay scheduler's lag)</h3>" + _table(
        ["level", "delay", "offset", "max offset", "lag (messages)", "oldest undelivered", "status"],
        [(d["level"], "-" if d["delayMs"] is None else f"{d['delayMs'] / 1000:g} s", _int(d["committedOffset"]),
          _int(d["maxOffset"]), _int(d["lagMessages"]), _time(d["oldestUnconsumedTimestamp"]), d["status"])
         for d in delays], numeric=(0, 2, 3, 4))


def _timer(plt, data) -> tuple[str, str]:
    import numpy as np

    timer = data["timer"]
    if timer is None:
        return _nothing("no timer store (5.x timerWheelEnable)")
    if not timer["byHour"]:
        return _nothing("no timer message pending")
    fig, ax = plt.subplots(figsize=(10, 2.8))
    hours = [int(h) for h in timer["byHour"]]
    x = np.array([h * 3600 for h in hours], dtype="datetime64[s]")
    ax.bar(x, list(timer["byHour"].values()), np.timedelta64(3600, "s"), color=ORANGE, align="edge")
    ax.set_ylabel("timer messages due")
    _hours_axis(ax, hours)
    ax.set_title(f"timer backlog by due hour (UTC): {timer['pending']:,} pending ({timer['recalled']:,} "
                 f"recalled"
                 + (f"; {timer['deliverable']:,} on the slots' chains" if timer["deliverable"] != timer["pending"]
                    else "") + f"), delivered up to {_time(timer['lastReadTimeMs'])}", loc="left")
    rows = [(_hour(int(h)), _int(n)) for h, n in timer["byHour"].items()]
    fig.tight_layout()
    return _svg(plt, fig, "timer"), _table(["due hour (UTC)", "pending timer messages"], rows, numeric=(1,))


def _flows(plt, data) -> tuple[str, str]:
    """Retries and dead letters per consumer group and hour: retries in blues, dead letters in reds."""
    import numpy as np

    groups = data["flows"]
    hours = sorted({int(h) for g in groups for field in ("retriesPerHour", "deadLettersPerHour") for h in g[field]})
    if not hours:
        return _nothing("no retries or dead letters (no %RETRY% or %DLQ% topic holds a message)")
    fig, ax = plt.subplots(figsize=(10, 2.8))
    x = np.array([h * 3600 for h in hours], dtype="datetime64[s]")
    base = np.zeros(len(hours))
    ranked = sorted(groups, key=lambda g: -(g["retries"] + g["deadLetters"]))[:TOP_GROUPS]
    for i, g in enumerate(ranked):
        for field, label, color in (("retriesPerHour", "retries", PALETTE[i % len(PALETTE)]),
                                    ("deadLettersPerHour", "dead letters", RED)):
            values = np.array([g[field].get(h, 0) for h in hours], dtype=float)
            if values.any():
                ax.bar(x, values, np.timedelta64(3600, "s"), bottom=base, align="edge", color=color,
                       label=f"{g['group']}: {label}", hatch="//" if field == "deadLettersPerHour" else None,
                       edgecolor="white")
                base += values
    ax.set_ylabel("messages per hour")
    _hours_axis(ax, hours)
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
    ax.set_title(f"where messages go: {sum(g['retries'] for g in groups):,} retries and "
                 f"{sum(g['deadLetters'] for g in groups):,} dead letters of {len(groups)} group(s)", loc="left")
    fig.tight_layout()
    rows = [(g["group"], _int(g["retries"]), _int(g["deadLetters"])) for g in groups]
    return _svg(plt, fig, "flows"), _table(["group", "retries (%RETRY%group)", "dead letters (%DLQ%group)"], rows,
                                          numeric=(1, 2))


def _transactions(plt, data) -> tuple[str, str]:
    tx = data["transactions"]
    topics = tx["byTopic"] if tx else []
    if not topics:
        return _nothing("no transactions (RMQ_SYS_TRANS_HALF_TOPIC holds none)")
    fig, ax = plt.subplots(figsize=(10, max(1.0, 0.35 * len(topics) + 0.9)))
    names = [t["topic"] or "?" for t in topics][::-1]
    left = [0] * len(topics)
    for state, color in (("COMMITTED", BLUE), ("ROLLED_BACK", GREY), ("PENDING", ORANGE)):
        values = [t[state] for t in topics][::-1]
        ax.barh(range(len(topics)), values, left=left, color=color, height=0.6, label=state.lower().replace("_", " "))
        left = [a + b for a, b in zip(left, values)]
    ax.set_yticks(range(len(topics)), names)
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
    ax.grid(axis="y", visible=False)
    summary = tx["summary"]
    ax.set_title(f"transactions per real topic: {summary['COMMITTED']:,} committed, {summary['ROLLED_BACK']:,} rolled "
                 f"back, {summary['PENDING']:,} pending ({summary['stuck']:,} stuck)", loc="left")
    fig.tight_layout()
    table = _table(["topic", "committed", "rolled back", "pending", "op missing", "stuck"],
                   [(t["topic"], _int(t["COMMITTED"]), _int(t["ROLLED_BACK"]), _int(t["PENDING"]), _int(t["opMissing"]),
                     _int(t["stuck"])) for t in topics], numeric=(1, 2, 3, 4, 5))
    if tx["open"]:
        table += "<h3>Pending, and committed without an op (mqtool transactions lists them all)</h3>" + _table(
            ["uniqKey", "keys", "producer group", "topic", "state", "checks", "first stored", "waited", "note"],
            [(t["uniqKey"], t["keys"] or "", t["producerGroup"] or "", t["topic"] or "", t["state"], t["checkTimes"],
              _time(t["firstStored"]), "-" if t["waitedMs"] is None else duration(t["waitedMs"]),
              "stuck" if t["stuck"] else "op missing: the check will ask again" if t["opMissing"] else "")
             for t in tx["open"]], numeric=(5,))
    checks = "; ".join(f"queue {c['queueId']}: half offset {c['halfOffset']} of {c['halfMaxOffset']}, op offset "
                       f"{c['opOffset']} of {c['opMaxOffset']}" for c in tx["checks"])
    table += f"<p>The transaction check (CID_RMQ_SYS_TRANS): {html.escape(checks)}</p>"
    return _svg(plt, fig, "transactions"), table


def _disk(plt, data) -> tuple[str, str]:
    clean = data["clean"]
    if clean is None or clean["disk"]["totalBytes"] <= 0:
        return _nothing("the disk could not be measured")
    fig, ax = plt.subplots(figsize=(10, 2.8))
    disk, levels = clean["disk"], clean["levels"]
    now = disk["ratio"]
    after = (disk["usedBytes"] - clean["freedBytes"]) / disk["totalBytes"]
    ax.barh([1], [now * 100], color=BLUE, height=0.55)
    ax.barh([0], [after * 100], color=BLUE2, height=0.55)
    ax.set_yticks([1, 0], ["now", "after the next clean"])
    for k, (name, value, color) in enumerate((
            ("diskMaxUsedSpaceRatio", levels["diskMaxUsedSpaceRatio"], ORANGE),
            ("diskSpaceCleanForciblyRatio", levels["diskSpaceCleanForciblyRatio"], RED),
            ("diskSpaceWarningLevelRatio", levels["diskSpaceWarningLevelRatio"], DARK))):
        ax.axvline(value * 100, color=color, linestyle="--", linewidth=1.2)
        ax.text(value * 100 - 0.6, 1.5 + 0.42 * k, f"{name} {value * 100:g} %", color=color, fontsize=7.5,
                va="center", ha="right", bbox={"facecolor": "white", "edgecolor": "none", "pad": 1})
    for yv, v in ((1, now), (0, after)):
        ax.text(v * 100, yv, f"  {v * 100:.1f} %", va="center", fontsize=8.5, color=DARK)
    ax.set_xlim(0, 100)
    ax.set_ylim(-0.5, 2.5)
    ax.set_xlabel(f"disk used, % ({disk['path']}: {_size(disk['usedBytes'])} of {_size(disk['totalBytes'])})")
    ax.grid(axis="y", visible=False)
    unread = clean["unreadRemoved"]
    ax.set_title(f"the disk against the broker's levels\nthe next clean frees {_size(clean['freedBytes'])}, "
                 f"removes {clean['messagesRemoved']:,} message(s)"
                 + ("" if unread is None else f", {unread:,} of them unread by a consumer group"), loc="left")
    rows = [(d["kind"], d["file"], d["action"], _size(d["size"]), d["why"]) for d in clean["decisions"]]
    losses = [(g, _int(n)) for g, n in clean["lossesByGroup"].items()]
    fig.tight_layout()
    note = ""
    if clean is not None:
        kept = clean.get("kept")
        note = (f"<p>The next <code>mqtool clean --now</code> with the store's settings (deleteWhen "
                f"{html.escape(str(clean['deleteWhen']))}), planned as a dry run."
                + (f" It stops at {html.escape(kept['file'])}: {html.escape(kept['why'])}." if kept else "") + "</p>")
    levels = []
    if clean is not None:
        disk = clean["disk"]
        levels = [("disk used now", _pct(disk["ratio"])),
                  ("disk used after the next clean", _pct((disk["usedBytes"] - clean["freedBytes"]) / disk["totalBytes"])
                   if disk["totalBytes"] > 0 else "-")]
        levels += [(name, _pct(value)) for name, value in clean["levels"].items()]
    tables = (_table(["disk", "ratio"], levels, numeric=(1,)) + note
              + _table(["kind", "file", "action", "size", "why"], rows, numeric=(3,))
              + "<h3>Unread messages the next clean would cost, per consumer group</h3>"
              + _table(["group", "unread messages removed"], losses, numeric=(1,)))
    return _svg(plt, fig, "disk"), tables


CHARTS = [("commitlog-map", "Commitlog map", _commitlog_map,
           "Commitlog files by offset, the damaged places stats found, what recover would cut, what the next "
           "clean would delete, the files in the trash, and the commitlog bytes kept in the quarantine."),
          ("per-hour", "Messages and bytes per hour", _per_hour, "Valid messages stored per hour, per topic."),
          ("sizes", "Message sizes", _sizes, "Records by size (storeSize), in powers of two."),
          ("lag", "Consumer lag", _lag, "Messages each consumer group has not consumed yet (mqtool lag)."),
          ("timer", "Timer backlog", _timer, "Timer messages (5.x timer store) not delivered yet, by the hour "
           "they are due."),
          ("flows", "Where messages go", _flows, "Messages the consumer groups sent back: retries delivered "
           "into %RETRY%group and dead letters in %DLQ%group, per hour (mqtool track follows one message)."),
          ("transactions", "Transactions", _transactions, "Transaction half messages: committed, rolled back, or "
           "pending the broker's check (mqtool transactions)."),
          ("disk", "Disk and the next clean", _disk, "The disk against diskMaxUsedSpaceRatio and "
           "diskSpaceCleanForciblyRatio, and what the next clean would delete and whom it would cost.")]

STYLE = """
:root { color-scheme: light; }
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif; margin: 0;
       background: #f6f7f9; color: #222; }
header { background: #1f2d3d; color: #fff; padding: 20px 32px; }
header h1 { margin: 0 0 4px; font-size: 22px; }
header p { margin: 0; opacity: .8; font-size: 13px; }
main { max-width: 1100px; margin: 0 auto; padding: 20px 24px 48px; }
.cards { display: grid; grid-template-columns: repeat(auto-fill, minmax(160px, 1fr)); gap: 12px; margin: 0 0 20px; }
.card { background: #fff; border-radius: 8px; padding: 12px 14px; box-shadow: 0 1px 2px rgba(0,0,0,.08); }
.card .v { font-size: 20px; font-weight: 600; }
.card .k { font-size: 12px; color: #666; }
.card.bad .v { color: #c62828; }
section { background: #fff; border-radius: 8px; padding: 16px 20px; margin: 0 0 20px;
          box-shadow: 0 1px 2px rgba(0,0,0,.08); }
section h2 { margin: 0 0 4px; font-size: 17px; }
section h3 { font-size: 14px; margin: 18px 0 6px; }
section > p.what { margin: 0 0 10px; color: #555; font-size: 13px; }
section p { font-size: 13.5px; }
figure { margin: 0 0 12px; }
figure svg { width: 100%; height: auto; }
.tablewrap { max-height: 420px; overflow: auto; border: 1px solid #e3e3e3; border-radius: 6px; }
table { border-collapse: collapse; width: 100%; font-size: 12.5px; }
th, td { padding: 4px 8px; border-bottom: 1px solid #eee; text-align: left; }
td.num { white-space: nowrap; }
th { background: #f0f2f5; position: sticky; top: 0; white-space: normal; vertical-align: bottom; }
section.empty h2 { display: inline; margin-right: 10px; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
tbody tr:nth-child(even) { background: #fafbfc; }
.more, .empty { color: #777; font-size: 12px; }
ul.problems li { color: #b71c1c; font-size: 13px; }
code { background: #f0f2f5; padding: 0 3px; border-radius: 3px; }
footer { color: #888; font-size: 12px; text-align: center; padding: 12px; }
"""


def _behind(groups) -> tuple:
    """The card of the group furthest behind: lag is per group (each group reads every message of
    its topics), so lags of several groups are never added up."""
    if not groups:
        return ("messages not consumed (most behind group)", "-", False)
    users = [g for g in groups if not is_system_group(g["group"])] or groups    # the broker's own groups last
    worst = max(users, key=lambda g: (g["lagMessages"], g["group"]))
    return (f"messages not consumed by {worst['group']} (most behind group)", _int(worst["lagMessages"]), False)


def render(data: dict) -> str:
    """The whole page."""
    plt = _plt()
    stats, clean, lag = data["stats"], data["clean"], data["lag"]
    messages = sum(t["messages"] for t in stats["topics"].values())
    size = sum(t["bytes"] for t in stats["topics"].values())
    cards = [("messages", _int(messages), False), ("bytes of messages", _size(size), False),
             ("topics", _int(len(stats["topics"])), False),
             ("commitlog files", _int(len(data["commitlog"]["files"])), False),
             ("damaged records / problems", f"{stats['damagedRecords']:,} / {stats['problems']:,}",
              bool(stats["problems"])),
             ("consumer groups", _int(len(lag["groups"])), False),
             _behind(lag["groups"]),
             ("offsets out of range", _int(sum(g["outOfRange"] for g in lag["groups"])),
              any(g["outOfRange"] for g in lag["groups"])),
             ("disk used", _pct(clean["disk"]["ratio"]) if clean else "-",
              bool(clean and clean["disk"]["ratio"] > clean["levels"]["diskMaxUsedSpaceRatio"])),
             ("next clean frees", _size(clean["freedBytes"]) if clean else "-", False)]
    parts = [f"<!DOCTYPE html><html lang=en><head><meta charset=utf-8>"
             f"<meta name=viewport content='width=device-width, initial-scale=1'>"
             f"<title>mqtool report: {html.escape(data['store'])}</title><style>{STYLE}</style></head><body>",
             f"<header><h1>mqtool report</h1><p>{html.escape(data['store'])} &middot; made "
             f"{html.escape(_time(data['generatedAt']))}</p></header><main>",
             "<div class=cards>" + "".join(f"<div class='card{' bad' if bad else ''}'><div class=v>{html.escape(v)}"
                                           f"</div><div class=k>{html.escape(k)}</div></div>" for k, v, bad in cards)
             + "</div>"]
    problems = list(data["problems"]) + list(lag["problems"]) + [f"{n:,} commitlog problem(s) of kind {k}"
                                                              for k, n in stats["problemKinds"].items()]
    if problems:
        parts.append("<section id=problems><h2>Problems</h2><ul class=problems>"
                     + "".join(f"<li>{html.escape(p)}</li>" for p in problems[:PROBLEMS_SHOWN])
                     + (f"<li>... and {len(problems) - PROBLEMS_SHOWN:,} more (mqtool lag, stats and verify-crc "
                        "list them all)</li>" if len(problems) > PROBLEMS_SHOWN else "") + "</ul></section>")
    if data["notes"]:
        parts.append("<section id=notes><h2>Notes</h2><ul>"
                     + "".join(f"<li>{html.escape(n)}</li>" for n in data["notes"]) + "</ul></section>")
    for ident, title, draw, what in CHARTS:
        svg, tables, *why = draw(plt, data)
        if svg is None:      # nothing to draw: a heading and why, not a blank card
            parts.append(f"<section id={ident} class=empty><h2>{html.escape(title)}</h2>"
                         f"<p class=empty>{html.escape(why[0])}</p>{tables}</section>")
            continue
        parts.append(f"<section id={ident}><h2>{html.escape(title)}</h2><p class=what>{html.escape(what)}</p>"
                     f"<figure class=chart data-chart={ident}>{svg}</figure>{tables}</section>")
    parts.append(f"</main><footer>mqtool report &middot; gathered in {data['seconds']:.2f} s</footer></body></html>")
    return "".join(parts)
