"""The steps every command repeats around its one library call, written once (after dbt-core's
cli/requires.py): `@requires.run` hands the command a `Run` as its first argument.

- readers: `run.reading(layouts)` says (and with --json, emits) which store a live process holds;
- writers: `run.write_config(...)` resolves STORE, --config and --set with each setting warning
  noted; `run.claim(layout, writer)` is the census and the lock (engine.store.claim_store, the one
  gate the embedded store passes too); `run.open_store(config)` opens the embedded store (made by
  `run.message_store`, for the commands that open it their own way) and says what its recovery
  cut first and what else opening did;
- the pipeline's: `run.open_engine(engine, jobs, master, spark_conf)`; a command with the engine
  options (options.spark_options) has them checked together (options.check_engine) before it runs;
- timed runs: `run.warm_up(*loaders)` loads the compiled kernels as start-up, and
  `run.timings()` gives `seconds` and `loadSeconds` (native.warmup.Stopwatch).
"""

from __future__ import annotations

import functools
import os
from contextlib import contextmanager

from mqtool.cli import options, output
from mqtool.native.warmup import Stopwatch


def run(command):
    """Decorate a click command's callback (innermost, under the options): it is called with a
    Run first, then its options."""
    @functools.wraps(command)
    def with_run(*args, **kwargs):
        if "engine" in kwargs:    # options.spark_options: the engine options checked together, once, first
            options.check_engine(kwargs["engine"], kwargs.get("master"), kwargs.get("spark_conf"))
        return command(Run(bool(kwargs.get("as_json"))), *args, **kwargs)

    return with_run


class Run:
    """One command's run: its --json choice and its stopwatch."""

    def __init__(self, as_json: bool = False):
        self.as_json = as_json
        self.stopwatch = Stopwatch()

    def reading(self, layouts, *, say: bool = True) -> None:
        """A reader: each store a live process holds is named (output.in_use)."""
        output.in_use(layouts, self.as_json, say=say)

    def write_config(self, store, config_path, settings, *, extra_notes=(), prefix: str = "warning",
                     say: bool = True):
        """A writer's settings (STORE, --config, --set), each setting warning noted on stderr (with
        say=False the command notes them itself, later: note_settings)."""
        from mqtool.storage.settings import store_config_for_write

        config = store_config_for_write(store, config_path, settings)
        if say:
            self.note_settings(config, extra_notes, prefix)
        return config

    @staticmethod
    def note_settings(config, extra_notes=(), prefix: str = "warning") -> None:
        for warning in list(config.effective_warnings()) + list(extra_notes):
            output.note(f"{prefix}: {warning}")

    @contextmanager
    def claim(self, layout, writer: str, *, write: bool = True):
        """The census's refusal, then the store's lock held for the block (engine.store.claim_store)."""
        from mqtool.engine.store import claim_store   # the engine loads only for the writers

        fd = claim_store(layout, writer, write=write)
        try:
            yield
        finally:
            if fd >= 0:
                os.close(fd)

    def open_store(self, config, **kwargs):
        """The embedded store, opened (MessageStore(config, **kwargs).open()); what its recovery
        cut first and what else opening did are noted."""
        engine = self.message_store(config, **kwargs).open()
        recovery_notice(engine)
        return engine

    def open_engine(self, engine: str, jobs: int = 1, master=None, spark_conf=()):
        """The pipeline engine the options chose (pipeline.engines.open_engine; run has checked
        them together: options.check_engine); --jobs is the local engine's, --master and
        --spark-conf Spark's."""
        from mqtool.pipeline import engines

        if engine == "spark":
            return engines.open_engine("spark", master=master, conf=spark_conf)
        return engines.open_engine("local", jobs=jobs)

    def message_store(self, config, **kwargs):
        """The embedded store, not opened yet (engine.store.MessageStore): the one place a
        command makes it."""
        from mqtool.engine.store import MessageStore

        return MessageStore(config, **kwargs)

    def warm_up(self, *loaders) -> None:
        """Load the compiled kernels the run needs: start-up, timed apart (loadSeconds)."""
        self.stopwatch.warm_up(*loaders)

    def timings(self) -> dict:
        """{"seconds": the run since warm_up, "loadSeconds": the warm-up}."""
        return self.stopwatch.to_json()


def recovery_notice(engine) -> None:
    """Say what opening the store did first: a recovery that cut data or followed an unclean
    shutdown (and where the cut bytes are kept), and the engine's other notes."""
    plan = engine.recovery_plan
    if plan is not None and (plan.mode == "abnormal" or plan.data_end > plan.cut or plan.queue_cuts):
        cut = ""
        if plan.data_end > plan.cut or plan.queue_cuts:
            cut = f": cut at commitlog offset {plan.cut}, cut bytes kept in {engine.quarantine.dir or 'the quarantine'}"
        why = "; it was not shut down cleanly" if plan.mode == "abnormal" else ""
        output.note(f"note: recovered the store first ({plan.mode} recovery{why}){cut}")
    for note in engine.notes:
        output.note(note)
