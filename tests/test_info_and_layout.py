"""info, store layout discovery (broker.conf paths, DLedger), lock detection, read-only promise."""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
import sys
import textwrap

import pytest
from helpers.sigint import default_sigint

from conftest import DAMAGED, DLEDGER, MIXED, UNDAMAGED, expected_read
from helpers.lockholder import holding_lock


def snapshot(root):
    """Bytes, mtime and atime of every file and directory under root."""
    state = {}
    for dirpath, dirnames, filenames in os.walk(root):
        st = os.stat(dirpath)
        state[dirpath] = ("dir", st.st_mtime_ns, st.st_atime_ns)
        for name in filenames:
            path = os.path.join(dirpath, name)
            st = os.stat(path)
            fd = os.open(path, os.O_RDONLY | os.O_NOATIME)  # the test itself must not touch atime
            try:
                digest = hashlib.sha256(os.read(fd, st.st_size + 1)).hexdigest()
            finally:
                os.close(fd)
            state[path] = (digest, st.st_mtime_ns, st.st_atime_ns)
    return state


def age_times(root):
    """Set every atime to 2 days before its mtime, so a kernel with relatime would update it on read."""
    for dirpath, dirnames, filenames in os.walk(root):
        for path in [dirpath] + [os.path.join(dirpath, n) for n in filenames]:
            st = os.stat(path)
            os.utime(path, ns=(st.st_mtime_ns - 2 * 86400 * 10**9, st.st_mtime_ns))


@pytest.mark.parametrize("name", UNDAMAGED)
def test_info_matches_broker_queues_and_offsets(name, extracted, run_cli):
    result = run_cli("info", extracted(name), "--json")
    assert result.code == 0, result.err
    (info,) = result.json_lines()
    lines = expected_read(name)
    store = next(l for l in lines if l["type"] == "store")
    pre = next(l for l in lines if l["type"] == "pre")
    assert info["commitlog"]["minOffset"] == store["minPhyOffset"]
    assert info["commitlog"]["maxOffset"] == store["maxPhyOffset"]
    queues = {(q["topic"], q["queueId"]): q for q in info["queues"]}
    broker = {(q["topic"], q["queueId"]): q for q in lines if q["type"] == "queue"}
    assert set(queues) == set(broker)
    for key, q in broker.items():
        assert queues[key]["minOffset"] == q["minOffset"], key
        assert queues[key]["maxOffset"] == q["maxOffset"], key
    assert info["cleanShutdown"] == (not pre["abortFileExists"])
    assert info["abort"]["exists"] == pre["abortFileExists"]
    for field, value in pre["checkpoint"].items():
        assert info["checkpoint"][field] == value
    assert info["lock"]["held"] is False
    assert info["format"] == ("5.x" if name == "basic5" else "4.x")


@pytest.mark.parametrize("compiled", [False, True])
@pytest.mark.parametrize("name", UNDAMAGED + DAMAGED + DLEDGER)
def test_info_commitlog_extent_is_where_the_brokers_recovery_ends_it(name, compiled, extracted, run_cli,
                                                                      monkeypatch):
    """maxOffset is the broker's maxPhyOffset after its recovery (a body whose CRC fails ends the
    data there, garbage after the last record is not data), lastStoreTimestamp its last record's
    store time; the reference walk (small stores) and the compiled one (COMPILED_FROM bytes on)
    agree."""
    from mqtool.forensics import storeinfo

    monkeypatch.setattr(storeinfo, "COMPILED_FROM", 0 if compiled else 1 << 62)
    result = run_cli("info", extracted(name), "--json")
    (info,) = result.json_lines()
    lines = expected_read(name)
    store = next(l for l in lines if l["type"] == "store")
    last = [l for l in lines if l["type"] == "commitlog_record"][-1]
    cl = info["commitlog"]
    assert (cl["minOffset"], cl["maxOffset"]) == (store["minPhyOffset"], store["maxPhyOffset"])
    assert cl["lastStoreTimestamp"] == last["dispatch"]["storeTimestamp"]
    assert cl["problemsInLastFile"] == (name in DAMAGED)


@pytest.mark.parametrize("name", [n for n in DLEDGER if n not in MIXED])
def test_info_walks_a_dledger_stores_entries_once(name, extracted, run_cli, monkeypatch):
    """The extent's walk (recovery.ledger_cut, compiled for a big store) gives the ledger its end:
    read_ledger is handed it instead of walking the entries again one at a time, and the ledger
    info shows is the one that walk finds."""
    from mqtool.storage import commitlog, dledger
    from mqtool.storage.settings import open_layout

    real, handed = dledger.read_ledger, []

    def spy(layout, queue, end=None):
        handed.append(end)
        return real(layout, queue, end)

    monkeypatch.setattr(dledger, "read_ledger", spy)
    (info,) = run_cli("info", extracted(name), "--json").json_lines()
    assert handed and handed[0] is not None
    layout = open_layout(str(extracted(name)), None, None)
    with commitlog.open_queue(layout) as queue:
        assert info["dledger"] == real(layout, queue).to_json()


def test_info_a_last_file_ending_in_its_blank_is_no_problem(store_copy, run_cli):
    """A full last file closed by its BLANK (the next record goes into a file not made yet): the
    broker's recovery ends the data at the BLANK, and nothing is past it but its header."""
    store = store_copy("multifile")
    files = sorted((store / "commitlog").iterdir())
    files[-1].unlink()
    blanks = [l for l in expected_read("multifile") if l["type"] == "commitlog_blank"]
    (info,) = run_cli("info", store, "--json").json_lines()
    assert info["commitlog"]["maxOffset"] == blanks[-1]["offset"]
    assert info["commitlog"]["problemsInLastFile"] == 0


def test_info_table_mentions_the_essentials(extracted, run_cli):
    result = run_cli("info", extracted("crash"))
    assert result.code == 0
    assert "abort file present" in result.out
    assert "44 files" in result.out or "45 files" in result.out
    assert "OrderTopic" in result.out


def test_info_shows_everything_and_exits_1_on_what_is_wrong(store_copy, run_cli):
    store = store_copy("basic")
    (store / "checkpoint").write_bytes(b"\0" * 10)
    (index,) = (store / "index").iterdir()
    data = bytearray(index.read_bytes())
    data[36:40] = (10**6).to_bytes(4, "big")        # indexCount beyond maxIndexNum
    index.write_bytes(bytes(data))
    result = run_cli("info", store, "--json")
    assert result.code == 1
    (info,) = result.json_lines()
    assert len(info["problems"]) == 2
    assert info["problems"][0].startswith(f"index/{index.name} at byte 36: indexCount is out of range")
    assert info["problems"][1] == f"{store / 'checkpoint'} at byte 10: checkpoint is 10 bytes; it needs at least 24"
    assert info["queues"]                            # the rest is still there
    assert result.err.strip() == f"mqtool: {info['problems'][0]} (and 1 more problem)"
    table = run_cli("info", store)
    assert table.code == 1
    assert "indexCount is out of range" in table.out and "checkpoint is 10 bytes" in table.out
    assert "BasicTopic" in table.out
    assert table.err == result.err


def test_info_names_the_consume_queue_file_of_unexpected_size_by_its_path(store_copy, run_cli):
    store = store_copy("basic")
    victim = store / "consumequeue" / "BasicTopic" / "2" / "00000000000000000000"
    with open(victim, "ab") as fh:
        fh.write(b"x")
    result = run_cli("info", store)
    assert result.code == 1
    assert result.err.startswith("mqtool: consumequeue/BasicTopic/2/00000000000000000000: unexpected size"), result.err
    assert "consumequeue/BasicTopic/2/00000000000000000000" in " ".join(result.out.split())


@pytest.mark.parametrize("command", [
    ("info",), ("info", "--json"),
    ("dump", "{store}", "commitlog"), ("dump", "{store}", "commitlog", "--json"),
    ("dump", "{store}", "consumequeue", "--json"), ("dump", "{store}", "index"),
    ("dump", "{store}", "checkpoint"), ("dump", "{store}", "config", "--json"),
])
def test_read_only_commands_change_no_byte_and_no_file_time(command, store_copy, run_cli):
    store = store_copy("crash")
    age_times(store)
    before = snapshot(store)
    args = [a.format(store=store) for a in command]
    if args[0] == "info":
        args.append(str(store))
    result = run_cli(*args)
    assert result.code == 0, result.err
    assert snapshot(store) == before


def test_info_reports_a_live_lock_holder(store_copy, run_cli):
    store = store_copy("basic")
    with holding_lock(store) as proc:
        result = run_cli("info", store, "--json")
        (info,) = result.json_lines()
        assert info["lock"]["held"] is True
        assert info["lock"]["heldBy"] == proc.pid
        assert info["lock"]["command"].startswith(f"{sys.executable} -c import fcntl")   # what holds it, from /proc
        table = run_cli("info", store)
        assert f"held by process {proc.pid} ({sys.executable} -c import fcntl" in " ".join(table.out.split())
    (info,) = run_cli("info", store, "--json").json_lines()
    assert info["lock"]["held"] is False


def test_broker_conf_with_several_and_readonly_commitlog_dirs(store_copy, tmp_path, run_cli):
    store = store_copy("multifile")
    # spread the commitlog over three directories, one of them read-only, as a broker may
    dirs = [tmp_path / "cl-a", tmp_path / "cl-b", tmp_path / "cl-ro"]
    for d in dirs:
        d.mkdir()
    files = sorted((store / "commitlog").iterdir())
    for i, f in enumerate(files):
        target = dirs[2] if i < 5 else dirs[i % 2]
        shutil.move(str(f), target / f.name)
    (store / "commitlog").rmdir()
    conf = tmp_path / "broker.conf"
    conf.write_text(textwrap.dedent(f"""\
        # a broker's config
        brokerName = broker-a
        storePathRootDir={store}
        storePathCommitLog={dirs[0]},{dirs[1]}
        readOnlyCommitLogStorePaths : {dirs[2]}
        mappedFileSizeCommitLog=65536
        mappedFileSizeConsumeQueue=6000
        maxHashSlotNum=100
        maxIndexNum=400
        namesrvAddr=127.0.0.1:9876
    """))
    result = run_cli("dump", store, "commitlog", "--config", conf, "--json", "--no-body")
    assert result.code == 0, result.err
    lines = result.json_lines()
    expected = [l for l in expected_read("multifile") if l["type"] == "commitlog_record"]
    assert [l["commitLogOffset"] for l in lines if l["type"] == "message"] == [l["offset"] for l in expected]
    (info,) = run_cli("info", store, "--config", conf, "--json").json_lines()
    assert info["commitlog"]["files"] == len(files)
    assert set(info["commitlog"]["dirs"]) == {str(d) for d in dirs}


def test_broker_conf_bad_value_is_a_usage_error_naming_the_line(store_copy, tmp_path, run_cli):
    conf = tmp_path / "broker.conf"
    conf.write_text("mappedFileSizeCommitLog=lots\n")
    result = run_cli("info", store_copy("basic"), "--config", conf)
    assert result.code == 2
    assert "line 1" in result.err and "mappedFileSizeCommitLog" in result.err


def test_one_reader_of_a_broker_conf_for_every_command(extracted, tmp_path, run_cli):
    """storage/config.read_broker_conf reads a broker.conf for every command: stats and export, which
    ask it for brokerName first, refuse an unreadable one as info does, and take the last line of a key."""
    missing = tmp_path / "nowhere" / "broker.conf"
    store = extracted("basic")
    said = {command: run_cli(command, store, "--config", missing, *more)
            for command, more in (("info", ()), ("stats", ()), ("export", ("--out", tmp_path / "out")))}
    assert {(r.code, r.err) for r in said.values()} == {
        (2, f"mqtool: {missing}: cannot read broker config: No such file or directory\n")}
    from mqtool.storage.settings import given_setting

    conf = tmp_path / "broker.conf"
    conf.write_bytes(b"brokerName = a\nbrokerName=b \n# brokerName=c\n")
    assert given_setting(str(conf), (), "brokerName") == "b"
    assert given_setting(str(conf), ("brokerName=d",), "brokerName") == "d"


@pytest.mark.parametrize("folder", ["dledger-n0", "RaftNode00-n0"])
def test_an_empty_dledger_folder_beside_a_commitlog_is_a_switch_not_yet_started(folder, store_copy, run_cli):
    """DLedger's layouts: the old dledger-<id>/ and the default <group>-<selfId>/ with data/,
    index/ and currterm.  Beside a commitlog/ that holds files it is a broker switched to DLedger
    (tests/test_mixed.py); with no DLedger data yet, DLedgerCommitLog.recover recovers the old
    commitlog as a plain one, normally even after a crash (isInrecoveringOldCommitlog), and will
    divide at its end; so do mqtool's readers and recover, and info says where."""
    store = store_copy("basic")
    (store / folder / "data").mkdir(parents=True)
    (store / folder / "index").mkdir()
    (store / folder / "currterm").write_text("0")
    info = run_cli("info", store, "--json")
    assert info.code == 0, info.err
    shown = info.json_lines()[0]
    census = {e["path"]: e for e in shown["census"]}
    assert census[folder + "/"]["feature"] == "dledger-switched"
    last = sorted((store / "commitlog").iterdir())[-1]
    assert shown["division"]["pending"] is True
    assert shown["division"]["dividedCommitlogOffset"] == int(last.name) + last.stat().st_size
    plain = run_cli("dump", store, "commitlog", "--json", "--no-body")
    assert plain.code == 0, plain.err
    assert plain.json_lines()[-1]["records"] > 0 and plain.json_lines()[-1]["problems"] == 0
    (store / "abort").write_text("1")      # recoverNormally, even after a crash: no DLedger data yet
    recover = run_cli("recover", store, "--json")
    assert recover.code == 0, recover.err
    assert recover.json_lines()[0]["mode"] == "normal"


def test_dledger_enabled_in_conf_beside_a_commitlog_reads_the_commitlog(store_copy, tmp_path, run_cli):
    """enableDLegerCommitLog on a plain store without a DLedger folder: the broker's next start
    recovers the old commitlog as it is, so it is read as it is."""
    conf = tmp_path / "broker.conf"
    conf.write_text("enableDLegerCommitLog=true\nmappedFileSizeCommitLog=65536\n")
    store = store_copy("basic")
    result = run_cli("dump", store, "commitlog", "--config", conf, "--json", "--no-body")
    assert result.code == 0, result.err
    assert result.json_lines()[-1] == run_cli("dump", store, "commitlog", "--json", "--no-body").json_lines()[-1]


@pytest.mark.parametrize("args,code", [
    (("info", "/nonexistent/store"), 4),
    (("dump", "/nonexistent/store", "commitlog"), 4),
    (("dump", "/nonexistent/store"), 4),
    (("info",), 2),
    (("dump", "--bogus"), 2),
    (("nosuchcommand",), 2),
    (("--version",), 0),
    (("--help",), 0),
])
def test_exit_codes(args, code, run_cli):
    result = run_cli(*args)
    assert result.code == code, (result.out, result.err)
    assert "Traceback" not in result.err


def test_not_a_store(tmp_path, run_cli):
    (tmp_path / "notes.txt").write_text("hello")
    result = run_cli("info", tmp_path)
    assert result.code == 4
    assert result.err.startswith("mqtool: ") and str(tmp_path) in result.err


def test_single_file_dump_infers_the_kind(extracted, run_cli):
    store = extracted("basic")
    cl = run_cli("dump", store / "commitlog" / "00000000000000000000", "--json", "--no-body")
    assert cl.code == 0
    assert sum(1 for l in cl.json_lines() if l["type"] == "message") == 50
    cq = run_cli("dump", store / "consumequeue" / "BasicTopic" / "1" / "00000000000000000000", "--json")
    units = [l for l in cq.json_lines() if l["type"] == "cq_unit"]
    assert len(units) == 13 and {u["topic"] for u in units} == {"BasicTopic"}
    cp = run_cli("dump", store / "checkpoint", "--json")
    assert cp.json_lines()[0]["type"] == "checkpoint"
    index = next((store / "index").iterdir())
    ix = run_cli("dump", index, "--json")
    assert ix.json_lines()[0]["type"] == "index_header"


def test_dump_filters(extracted, run_cli):
    store = extracted("multifile")
    lines = run_cli("dump", store, "commitlog", "--json", "--no-body", "--topic", "PaymentTopic",
                    "--queue", "2", "--limit", "7").json_lines()
    messages = [l for l in lines if l["type"] == "message"]
    assert len(messages) == 7
    assert {(m["topic"], m["queueId"]) for m in messages} == {("PaymentTopic", 2)}
    assert [m["queueOffset"] for m in messages] == list(range(7))
    window = run_cli("dump", store, "commitlog", "--json", "--no-body", "--offset-from", "65536",
                     "--offset-to", "131072").json_lines()
    offsets = [l["commitLogOffset"] for l in window if l["type"] == "message"]
    expected = [l["offset"] for l in expected_read("multifile")
                if l["type"] == "commitlog_record" and 65536 <= l["offset"] < 131072]
    assert offsets == expected
    cq = run_cli("dump", store, "consumequeue", "--json", "--topic", "AuditTopic",
                 "--queue-offset-from", "298", "--queue-offset-to", "302").json_lines()
    assert [u["offset"] for u in cq if u["type"] == "cq_unit"] == [298, 299, 300, 301]


def test_python_dash_m(extracted):
    proc = subprocess.run([sys.executable, "-m", "mqtool", "info", str(extracted("basic")), "--json"],
                          capture_output=True, text=True)
    assert proc.returncode == 0 and '"type":"info"' in proc.stdout


@pytest.mark.parametrize("args", [("--help",), ("info", "{store}"), ("lookup-by-key", "{store}", "--topic",
                                                                    "BasicTopic", "user-3")])
def test_commands_that_compile_nothing_do_not_load_numba(args, extracted):
    """Loading numba costs ~0.15 s a command; only the compiled paths (verify-crc, rebuild-cq,
    salvage, recovery, batch appends) load it."""
    script = ("import sys, runpy; sys.argv = ['mqtool', *sys.argv[1:]]\n"
              "try:\n    runpy.run_module('mqtool', run_name='__main__')\n"
              "except SystemExit as exit:\n    print('numba' in sys.modules, exit.code)")
    argv = [a.format(store=extracted("basic")) for a in args]
    proc = subprocess.run([sys.executable, "-c", script, *argv], capture_output=True, text=True)
    assert proc.stdout.splitlines()[-1] == "False 0", proc.stdout + proc.stderr


@pytest.mark.parametrize("args", [("dump", "{store}", "commitlog"), ("dump", "{store}", "commitlog", "--json"),
                                  ("info", "{store}")])
def test_closed_pipe_is_quiet_and_exits_141(args, extracted):
    mqtool = os.path.join(os.path.dirname(sys.executable), "mqtool")
    store = extracted("multifile")
    command = " ".join([mqtool] + [a.format(store=store) for a in args])
    proc = subprocess.run(["bash", "-c", f"{command} | head -1; echo \"status=${{PIPESTATUS[0]}}\" >&2"],
                          capture_output=True, text=True)
    assert len(proc.stdout.splitlines()) == 1
    assert proc.stderr.strip() == "status=141"


def test_dump_limit_stops_reading(extracted, run_cli):
    lines = run_cli("dump", extracted("multifile"), "commitlog", "--json", "--no-body", "--limit", "3").json_lines()
    summary = lines[-1]
    assert [l["type"] for l in lines] == ["message"] * 3 + ["summary"]
    assert summary["complete"] is False and summary["records"] == 3
    first_three = [l for l in expected_read("multifile") if l["type"] == "commitlog_record"][:3]
    assert summary["stoppedAt"] == first_three[-1]["offset"] + first_three[-1]["size"]


def test_ctrl_c_exits_130_without_a_traceback(extracted):
    mqtool = os.path.join(os.path.dirname(sys.executable), "mqtool")
    proc = subprocess.Popen([mqtool, "dump", str(extracted("multifile")), "commitlog", "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=default_sigint)
    proc.stdout.read(4096)          # it is running and blocked on a full pipe now
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130
    assert b"Traceback" not in err
    assert err.decode().strip() == "mqtool: interrupted"


def test_the_interrupt_tests_hold_when_the_runner_ignores_sigint(tmp_path):
    """A suite run in the background inherits SIGINT ignored: the Ctrl-C tests give their
    children the default back (helpers.sigint), so they test Ctrl-C there too."""
    runner = ("import signal, subprocess, sys; signal.signal(signal.SIGINT, signal.SIG_IGN); "
              "sys.exit(subprocess.call(sys.argv[1:]))")
    here = os.path.dirname(os.path.abspath(__file__))
    proc = subprocess.run([sys.executable, "-c", runner, sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           f"--basetemp={tmp_path / 'inner'}", "-k", "ctrl_c", os.path.join(here, "test_combine.py"), os.path.join(here, "test_info_and_layout.py")],
                          capture_output=True, text=True, timeout=300, cwd=os.path.dirname(here))
    assert proc.returncode == 0 and "2 passed" in proc.stdout, proc.stdout[-2000:] + proc.stderr[-2000:]
