"""`mqtool report`: the page's numbers against the broker's view of the fixtures, and the page itself
loaded in a real headless browser (Debian's chromium, driven by selenium through chromium-driver):
no console error, no network request, every chart there and drawn."""

from __future__ import annotations

import json
import re
import shutil
from collections import Counter
from pathlib import Path

import pytest
from conftest import expected_read
from helpers.lockholder import holding_lock
from test_lag import write_offsets

pytest.importorskip("matplotlib", reason="matplotlib (the report extra) is not installed")

from mqtool.cli import reportpage  # noqa: E402

CHARTS = [ident for ident, *_ in reportpage.CHARTS]
EMPTY = {"timer", "flows", "transactions"}   # multifile has no timer store, retry or transaction: a line each


@pytest.fixture(scope="module")
def page(tmp_path_factory, extracted):
    """A report of multifile with consumer offsets, one group behind and one out of range."""
    root = tmp_path_factory.mktemp("report")
    store = root / "store"
    shutil.copytree(extracted("multifile"), store, symlinks=True)
    write_offsets(store, {"OrderTopic@billing": {0: 10, 1: 369, 2: 0, 3: 0}, "AuditTopic@audit": {0: 600}})
    return store, root / "report.html"


def test_report_writes_one_page_with_every_chart_and_its_numbers(page, run_cli):
    store, out = page
    result = run_cli("report", store, "-o", out, "--json")
    assert result.code == 1          # the page shows audit's offset out of range
    summary = result.json_lines()[0]
    assert summary["type"] == "report" and summary["charts"] == len(CHARTS) and summary["problems"] == 1
    text = out.read_text(encoding="utf-8")
    assert not list(out.parent.glob(".*.tmp"))          # written through a temporary file, renamed
    for ident in CHARTS:
        if ident in EMPTY:
            assert f"<section id={ident} class=empty><h2>" in text and f"data-chart={ident}" not in text
        else:
            assert re.search(rf"<figure class=chart data-chart={ident}><svg", text), ident
    # self-contained: nothing to fetch
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)""", text)
    assert "<script" not in text and "@import" not in text and "@font-face" not in text
    assert set(re.findall(r"url\((.)", text)) <= {"#"}      # only the SVGs' own clip paths
    messages = [l for l in expected_read("multifile") if l["type"] == "message"]
    per_topic = Counter(m["topic"] for m in messages)
    for topic, count in per_topic.items():      # the per-hour table: one hour, each topic's count
        assert re.search(rf"<td>{topic}</td><td class=num>{count:,}</td>", text), topic
    assert "offset 600 is 12 above the queue&#x27;s max offset 588" in text


def test_the_lag_card_is_one_groups_lag_never_a_sum_over_groups(store_copy, run_cli, tmp_path):
    store = store_copy("basic")      # 50 messages on BasicTopic's 4 queues
    queues = {q["queueId"]: q["maxOffset"] for q in run_cli("info", store, "--json").json_lines()[0]["queues"]
              if q["topic"] == "BasicTopic"}
    write_offsets(store, {"BasicTopic@early": {q: 0 for q in queues}, "BasicTopic@late": {q: 2 for q in queues}})
    out = tmp_path / "r.html"
    assert run_cli("report", store, "-o", out).code == 0
    cards = dict((k, v) for v, k in re.findall(r"<div class=v>([^<]*)</div><div class=k>([^<]*)</div>",
                                                out.read_text(encoding="utf-8")))
    assert cards["messages not consumed by early (most behind group)"] == f"{sum(queues.values()):,}"


def test_report_is_read_only(store_copy, run_cli, tmp_path):
    store = store_copy("multifile")
    write_offsets(store, {"OrderTopic@billing": {0: 10}})
    files = [p for p in store.rglob("*") if p.is_file()]     # (listing a folder here sets its atime)
    before = {p: (p.stat().st_mtime_ns, p.stat().st_atime_ns, p.stat().st_size) for p in files}
    assert run_cli("report", store, "-o", tmp_path / "r.html").code == 0
    assert {p: (p.stat().st_mtime_ns, p.stat().st_atime_ns, p.stat().st_size) for p in files} == before
    assert sorted(p for p in store.rglob("*") if p.is_file()) == sorted(files)


def test_report_shows_damage_and_what_recover_would_cut(store_copy, run_cli, tmp_path):
    store = store_copy("garbage-tail")
    out = tmp_path / "r.html"
    result = run_cli("report", store, "-o", out, "--json")
    assert result.code == 1
    plan = run_cli("recover", store, "--dry-run", "--json").json_lines()
    cut = next(l for l in plan if "cut" in l)["cut"]
    text = out.read_text(encoding="utf-8")
    assert f"recover cuts from {cut:,}" in text
    assert "damaged place(s)" in text
    # once recovered, the cut bytes are in the quarantine, and the page says where they came from
    assert run_cli("recover", store).code in (0, 1)
    run_cli("report", store, "-o", out)
    section = out.read_text(encoding="utf-8").split("<h3>Quarantine")[1].split("</section>")[0]
    assert re.search(rf"<td>{cut:,} \+\d", section), section[:2000]


# ---------------------------------------------------------------------- in a real browser

def _browser():
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    if not chromium or not driver:
        pytest.skip("no browser: Debian's chromium and chromium-driver are not installed (./bootstrap installs them)")
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium (the test extra) is not installed")
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1280,2000",
                "--disable-background-networking", "--no-first-run"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    return webdriver.Chrome(options=options, service=Service(executable_path=driver))


def test_the_page_loads_in_chromium_with_no_error_no_request_and_every_chart(page, run_cli):
    store, out = page
    if not out.exists():
        assert run_cli("report", store, "-o", out).code == 1
    browser = _browser()
    try:
        url = out.resolve().as_uri()
        browser.get(url)
        assert browser.title.startswith("mqtool report")
        errors = [e for e in browser.get_log("browser") if e["level"] in ("SEVERE", "WARNING")]
        assert errors == []
        requests = []
        for entry in browser.get_log("performance"):
            message = json.loads(entry["message"])["message"]
            if message["method"] == "Network.requestWillBeSent":
                requests.append(message["params"]["request"]["url"])
        assert requests and all(u == url for u in requests), requests      # the page itself, nothing else
        assert browser.execute_script("return performance.getEntriesByType('resource').length") == 0
        for ident in set(CHARTS) - EMPTY:
            size = browser.execute_script(
                "const s = document.querySelector(`figure[data-chart='${arguments[0]}'] svg`);"
                "if (!s) return null; const r = s.getBoundingClientRect();"
                "return [r.width, r.height, s.querySelectorAll('path, use, rect').length];", ident)
            assert size is not None, ident
            width, height, shapes = size
            assert width > 600 and height > 50 and shapes > 10, (ident, size)
        tables = browser.execute_script("return document.querySelectorAll('section table').length")
        # the timer store's, the retries' and the transactions' are empty here: a line each, no table
        assert tables >= len(CHARTS) - len(EMPTY)
        for ident in EMPTY:      # an empty section is a line, not a blank card
            height = browser.execute_script(f"return document.getElementById('{ident}').getBoundingClientRect().height")
            assert height < 120, (ident, height)
    finally:
        browser.quit()


def test_every_table_fits_its_card_at_1400_and_1024_pixels(store_copy, run_cli, tmp_path):
    """The lag table (9 columns, a long system group's name) is no wider than its card."""
    store = store_copy("multifile")
    out = tmp_path / "r.html"
    write_offsets(store, {"OrderTopic@billing": {0: 10, 1: 369, 2: 0, 3: 0}, "AuditTopic@audit": {0: 600},
                          "RMQ_SYS_TRANS_HALF_TOPIC@CID_RMQ_SYS_TRANS": {0: 0}})
    assert run_cli("report", store, "-o", out).code == 1
    browser = _browser()
    try:
        for width in (1400, 1024):
            browser.set_window_size(width, 1200)
            browser.get(out.resolve().as_uri())
            wide = browser.execute_script(
                "return [...document.querySelectorAll('.tablewrap')].filter(t => t.scrollWidth > t.clientWidth + 1)"
                ".map(t => [t.closest('section').id, t.clientWidth, t.scrollWidth])")
            assert wide == [], (width, wide)
    finally:
        browser.quit()


def test_the_brokers_own_group_is_marked_as_the_systems(store_copy, run_cli, tmp_path):
    store = store_copy("basic")
    write_offsets(store, {"BasicTopic@users": {0: 5}, "RMQ_SYS_TRANS_HALF_TOPIC@CID_RMQ_SYS_TRANS": {0: 0}})
    out = tmp_path / "r.html"
    run_cli("report", store, "-o", out)
    section = out.read_text(encoding="utf-8").split("<section id=lag>")[1].split("</section>")[0]
    assert "<td>CID_RMQ_SYS_TRANS (the broker&#x27;s own: the transaction check&#x27;s progress" in section
    assert "<td>users</td>" in section


def test_the_timer_backlog_counts_the_pending_timer_messages(tmp_path, run_cli):
    import tarfile

    from conftest import FIXTURES

    with tarfile.open(FIXTURES / "rocketmq-5.3.3/timer5/store.tar.gz") as tar:
        tar.extractall(tmp_path, filter="tar")
    out = tmp_path / "r.html"
    # no consumerOffset.json: nobody consumed yet, a note and not a problem (a cron job's exit 0)
    assert run_cli("report", tmp_path / "store", "-o", out).code == 0
    text = out.read_text(encoding="utf-8")
    assert "<section id=problems>" not in text and "no consumer offsets" in text.split("<section id=notes>")[1]
    section = text.split("<section id=timer>")[1].split("</section>")[0]
    counts = [int(n.replace(",", "")) for n in re.findall(r"<td class=num>([\d,]+)</td></tr>", section)]
    # what info, stats and dump say (timerview.summary): 70 to deliver, 2 recalled by delete units
    timer = run_cli("info", tmp_path / "store", "--json").json_lines()[0]["timer"]
    assert (timer["pending"], timer["deliverable"], timer["recalled"]) == (70, 70, 2)
    assert sum(counts) == 70 and len(counts) > 5
    assert "70 pending (2 recalled)" in section


def test_the_disk_levels_come_from_the_brokers_conf(store_copy, run_cli, tmp_path):
    store = store_copy("multifile")
    write_offsets(store, {"OrderTopic@billing": {0: 10}})
    conf = tmp_path / "broker.conf"
    conf.write_text("mappedFileSizeCommitLog=65536\nmappedFileSizeConsumeQueue=6000\nmaxHashSlotNum=100\n"
                    "maxIndexNum=400\ndiskMaxUsedSpaceRatio=61\ndiskSpaceCleanForciblyRatio=72\n"
                    "fileReservedTime=1\n")
    out = tmp_path / "r.html"
    assert run_cli("report", store, "--config", conf, "-o", out).code == 0
    section = out.read_text(encoding="utf-8").split("<section id=disk>")[1].split("</section>")[0]
    assert "<td>diskMaxUsedSpaceRatio</td><td class=num>61.0 %</td>" in section
    assert "<td>diskSpaceCleanForciblyRatio</td><td class=num>72.0 %</td>" in section
    assert "<td>diskSpaceWarningLevelRatio</td><td class=num>90.0 %</td>" in section     # RocketMQ's default
    # fileReservedTime 1 h: the fixture's files are days old, so the next clean deletes the oldest
    # commitlog files, at most deleteFileBatchMax (10) of them
    assert len(re.findall(r"<td>commitlog</td><td>commitlog/\d+</td><td>delete</td>", section)) == 10
    assert "<td>billing</td>" in section          # and costs billing unread messages of OrderTopic/0


def test_the_next_clean_is_the_plan_clean_dry_run_makes(store_copy, run_cli):
    """The report's "next clean" is `clean --dry-run`'s plan (engine.store.reclaim_dry_run): while
    a process holds the store, clean --dry-run refuses, and the report says that its plan is not
    shown instead of drawing one."""
    from mqtool.pipeline import report

    store = store_copy("multifile")
    with holding_lock(store) as holder:
        assert run_cli("clean", store, "--dry-run").code == 3
        data = report.gather(str(store))
        assert data["clean"] is None
        assert any(note.startswith("clean's plan is not shown") and f"process {holder.pid}" in note
                   for note in data["notes"])


@pytest.fixture
def drawn(page, run_cli, tmp_path, monkeypatch):
    """The figures the page is drawn from, by chart, with their ticks as placed when drawn."""
    figures = {}
    draw = reportpage._svg

    def keep(plt, fig, name):
        fig.canvas.draw()
        figures[name] = (fig, {id(ax): (list(ax.get_xticks()), list(ax.get_yticks()),
                                        [t.get_text() for t in ax.get_xticklabels()],
                                        [t.get_text() for t in ax.get_yticklabels()]) for ax in fig.axes})
        return draw(plt, fig, name)

    monkeypatch.setattr(reportpage, "_svg", keep)
    store, _ = page
    run_cli("report", store, "-o", tmp_path / "r.html")
    return figures


def test_hourly_bars_cover_the_hour_and_date_ticks_land_on_hours(drawn):
    import matplotlib.dates as mdates

    fig, ticks = drawn["per-hour"]
    top, bottom = fig.axes[:2]
    assert top.patches and all(abs(p.get_width() - 1 / 24) < 1e-9 for p in top.patches)   # dates count days
    xticks = ticks[id(bottom)][0]
    assert xticks and all(abs(t * 24 - round(t * 24)) < 1e-6 for t in xticks), [mdates.num2date(t) for t in xticks]


def test_byte_axes_tick_at_round_binary_values(drawn):
    fig, ticks = drawn["per-hour"]
    _, yticks, _, ylabels = ticks[id(fig.axes[1])]
    _binary(yticks, ylabels)
    fig, ticks = drawn["commitlog-map"]
    xticks, _, xlabels, _ = ticks[id(fig.axes[0])]
    _binary(xticks, xlabels)


def test_the_size_histogram_keeps_its_empty_buckets(drawn, page, run_cli):
    sizes = drawn["sizes"][0].axes[0]
    heights = [int(round(p.get_height())) for p in sizes.patches]
    hist = run_cli("stats", page[0], "--json").json_lines()[-1]["sizeHistogram"]
    low, high = min(map(int, hist)), max(map(int, hist))
    assert len(heights) == (high // low).bit_length()       # every power of two between, 16 KiB's empty one too
    assert heights == [hist.get(str(low << i), 0) for i in range(len(heights))] and 0 in heights


def _binary(ticks, labels) -> None:
    """Ticks a power of two apart, each a multiple of it; labels whole numbers of one unit."""
    inside = [t for t in ticks if t >= 0]
    step = inside[1] - inside[0]
    assert step == 2 ** round(__import__("math").log2(step)), ticks
    assert all(t % step == 0 for t in inside), ticks
    assert all(re.fullmatch(r"[\d,]+ (B|KiB|MiB|GiB)", label) for label in labels if label), labels


def test_where_messages_go_and_the_transactions(store_copy, run_cli, tmp_path):
    """journey5: retries and dead letters per group are the messages the broker stored in each
    %RETRY% and %DLQ% topic; the transactions section is `mqtool transactions`' answer."""
    store = store_copy("journey5")
    out = tmp_path / "r.html"
    assert run_cli("report", store, "-o", out).code == 1       # two transactions stuck: problems
    text = out.read_text(encoding="utf-8")
    flows = text.split("<section id=flows>")[1].split("</section>")[0]
    per_topic = Counter(m["topic"] for m in expected_read("journey5") if m["type"] == "message")
    for group in ("billing", "audit"):
        retries, dead = per_topic.get(f"%RETRY%{group}", 0), per_topic.get(f"%DLQ%{group}", 0)
        assert f"<td>{group}</td><td class=num>{retries}</td><td class=num>{dead}</td>" in flows
    tx = text.split("<section id=transactions>")[1].split("</section>")[0]
    answer = run_cli("transactions", store, "--json").json_lines()
    topic = [line for line in answer if line["type"] == "topic"][0]
    assert (f"<td>{topic['topic']}</td><td class=num>{topic['COMMITTED']}</td><td class=num>{topic['ROLLED_BACK']}"
            f"</td><td class=num>{topic['PENDING']}</td>") in tx
    stuck = {t["uniqKey"] for t in answer if t["type"] == "transaction" and t["stuck"]}
    assert stuck and all(u in tx for u in stuck)
    assert "stuck" in text.split("<section id=problems>")[1].split("</section>")[0]
