"""One Engine protocol (mqtool.pipeline.engines.Engine) that the local and the Spark engine both
implement, member for member and signature for signature: a method added to, renamed in or
changed in one engine and not the other fails here, not in a command run on the other engine."""

from __future__ import annotations

import inspect

import pytest

from mqtool.pipeline.engines import Engine
from mqtool.pipeline.local import LocalEngine

pytest.importorskip("pyspark")
from mqtool.pipeline.spark.engine import SparkEngine  # noqa: E402

ENGINES = [LocalEngine, SparkEngine]


def protocol_members() -> dict[str, object]:
    members = {name: value for name, value in vars(Engine).items()
               if not name.startswith("_") and (callable(value) or isinstance(value, property))}
    return {**members, **{name: None for name in getattr(Engine, "__annotations__", {})}}


def shape(member):
    """What callers rely on: a method's parameters (names, kinds, defaults), a property, an attribute."""
    if isinstance(member, property):
        return "property"
    if callable(member):
        return [(p.name, p.kind, p.default) for p in inspect.signature(member).parameters.values()]
    return "attribute"


def test_the_protocol_names_what_commands_call():
    assert set(protocol_members()) == {"name", "cores", "map", "imap", "close"}


@pytest.mark.parametrize("engine", ENGINES, ids=lambda e: e.__name__)
def test_each_engine_implements_the_protocol_with_its_signatures(engine):
    for name, member in protocol_members().items():
        assert hasattr(engine, name), f"{engine.__name__} has no {name}"
        if member is None:     # a plain attribute: a class-level value of the declared type
            assert isinstance(getattr(engine, name), str), f"{engine.__name__}.{name}"
            continue
        assert shape(inspect.getattr_static(engine, name)) == shape(member), f"{engine.__name__}.{name}"


def test_the_two_engines_share_their_public_interface():
    """Beyond the protocol: the local engine has nothing the Spark engine lacks, and the Spark
    engine's extras are its own (opening a session, its DataFrame read, Spark's export), so a
    command that calls anything else works on one engine only."""
    local = {n for n in dir(LocalEngine) if not n.startswith("_")}
    spark = {n for n in dir(SparkEngine) if not n.startswith("_")}
    assert local <= spark
    assert spark - local == {"open", "read", "export"}
    for name in local & spark:
        local_shape, spark_shape = (shape(inspect.getattr_static(e, name)) for e in (LocalEngine, SparkEngine))
        assert local_shape == spark_shape, name


def test_an_engine_is_an_engine_at_run_time():
    assert isinstance(LocalEngine(1), Engine)
    assert not isinstance(object(), Engine)


@pytest.mark.parametrize("command", [["verify-crc"], ["rebuild-cq", "--dry-run"], ["stats"],
                                     ["export", "--format", "jsonl", "--out", "{tmp}/out"]])
def test_every_command_refuses_spark_options_without_the_spark_engine_alike(command, store_copy, run_cli, tmp_path):
    """--master and --spark-conf go with --engine spark: each engine command says so in the same
    words (cli/options.check_engine), before it reads or locks anything: a STORE that is not
    there is not even looked at."""
    store = store_copy("basic")
    rest = [a.format(tmp=tmp_path) for a in command[1:]]
    for where in (store, tmp_path / "no-such-store"):
        for option in (["--master", "local[2]"], ["--spark-conf", "spark.ui.enabled=false"]):
            result = run_cli(command[0], where, *rest, *option)
            assert result.code == 2, result.err
            assert "--master and --spark-conf need --engine spark" in result.err
    assert not (tmp_path / "out").exists()
