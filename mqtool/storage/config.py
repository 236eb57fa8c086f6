"""StoreConfig: RocketMQ's store settings, with the broker's own names and defaults.

Attribute names are MessageStoreConfig's (and, for the few broker-level
settings the store needs, BrokerConfig's), so a broker.conf line means the
same thing to mqtool as to a broker.  `load_broker_conf` reads a broker.conf
(Java properties syntax); unknown keys are kept in `extra` and ignored.
Where the broker silently clamps or rounds a value, `effective_warnings`
says so.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path

from mqtool.errors import UsageError
from mqtool.formats.javastr import parse_properties
from mqtool.storage import fsutil

GIB = 1024 * 1024 * 1024
CQ_UNIT_SIZE = 20
MULTI_PATH_SPLITTER = ","


@dataclass
class StoreConfig:
    # paths (MessageStoreConfig)
    storePathRootDir: str = str(Path.home() / "store")
    storePathCommitLog: str | None = None
    storePathDLedgerCommitLog: str | None = None
    readOnlyCommitLogStorePaths: str | None = None
    # file sizes
    mappedFileSizeCommitLog: int = GIB
    mappedFileSizeConsumeQueue: int = 300000 * CQ_UNIT_SIZE
    enableConsumeQueueExt: bool = False
    mappedFileSizeConsumeQueueExt: int = 48 * 1024 * 1024
    maxHashSlotNum: int = 5000000
    maxIndexNum: int = 5000000 * 4
    # messages
    maxMessageSize: int = 1024 * 1024 * 4
    messageDelayLevel: str = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
    messageIndexEnable: bool = True
    messageIndexSafe: bool = False
    duplicationEnable: bool = False
    # flush and commit
    flushDiskType: str = "ASYNC_FLUSH"
    syncFlushTimeout: int = 1000 * 5
    flushIntervalCommitLog: int = 500
    flushCommitLogTimed: bool = True
    flushCommitLogLeastPages: int = 4
    flushCommitLogThoroughInterval: int = 1000 * 10
    commitIntervalCommitLog: int = 200
    commitCommitLogLeastPages: int = 4
    commitCommitLogThoroughInterval: int = 200
    flushIntervalConsumeQueue: int = 1000
    flushConsumeQueueLeastPages: int = 2
    flushConsumeQueueThoroughInterval: int = 1000 * 60
    warmMapedFileEnable: bool = False
    flushLeastPagesWhenWarmMapedFile: int = 1024 // 4 * 16
    transientStorePoolEnable: bool = False
    transientStorePoolSize: int = 5
    fastFailIfNoBufferInStorePool: bool = False
    # recovery
    checkCRCOnRecover: bool = True
    # reclaim
    cleanResourceInterval: int = 10000
    deleteCommitLogFilesInterval: int = 100
    deleteConsumeQueueFilesInterval: int = 100
    destroyMapedFileIntervalForcibly: int = 1000 * 120
    deleteFileBatchMax: int = 10              # 5.x store key; 4.9.8: DELETE_FILES_BATCH_MAX, fixed at 10
    redeleteHangedFileInterval: int = 1000 * 120
    deleteWhen: str = "04"
    diskMaxUsedSpaceRatio: int = 75
    fileReservedTime: int = 72
    cleanFileForciblyEnable: bool = True
    diskSpaceWarningLevelRatio: int = 90      # 5.x store key; 4.9.8: JVM property, 0.90
    diskSpaceCleanForciblyRatio: int = 85     # 5.x store key; 4.9.8: JVM property, 0.85
    # the 5.x timer store (TimerMessageStore)
    timerWheelEnable: bool = True
    timerPrecisionMs: int = 1000
    mappedFileSizeTimerLog: int = 100 * 1024 * 1024
    # role
    brokerRole: str = "ASYNC_MASTER"
    enableDLegerCommitLog: bool = False
    dLegerSelfId: str | None = None           # DLedger mode: whose dledger-<selfId>/ folder is read
    # 5.x message format
    autoMessageVersionOnTopicLen: bool = True
    enabledAppendPropCRC: bool = False
    forceVerifyPropCRC: bool = False
    # broker-level settings the store's bytes depend on (BrokerConfig / NettyServerConfig)
    brokerName: str = "broker-a"
    brokerClusterName: str = "DefaultCluster"
    brokerIP1: str = "127.0.0.1"
    listenPort: int = 10911
    # the transaction check (BrokerConfig): a half is first checked once older than transactionTimeOut,
    # the check runs every transactionCheckInterval (4.9.8: 60 s, 5.3.3: 30 s; the longer is
    # assumed), and a half checked transactionCheckMax times is discarded
    transactionTimeOut: int = 6 * 1000
    transactionCheckInterval: int = 60 * 1000
    transactionCheckMax: int = 15
    # store features whose files mqtool must keep consistent (storage/census.py)
    storeType: str = "default"                # "defaultRocksDB": consume queues in RocksDB (5.x)
    enableLmq: bool | None = None             # None: not given, inferred from the store's %LMQ% queues
    enableMultiDispatch: bool | None = None   # the same
    enableCalcFilterBitMap: bool = False
    mapperFileSizeBatchConsumeQueue: int | None = None   # units; None: the files' size, else 300000
    enableControllerMode: bool = False
    storePathEpochFile: str = ""              # "": <root>/epochFileCheckpoint
    # mqtool: which broker generation the written bytes follow ("4" or "5")
    storeFormat: str = "4"
    extra: dict = field(default_factory=dict, repr=False)
    # where each file size came from ("broker.conf", "--set", "the store's files", "RocketMQ's default"),
    # so that a writer can say which size it used (store_config_for_write fills it)
    origins: dict = field(default_factory=dict, repr=False, compare=False)

    # ------------------------------------------------------------ derived values
    @property
    def root(self) -> Path:
        return Path(self.storePathRootDir)

    def commitlog_dirs(self) -> list[Path]:
        """Writable commitlog directories, as storePathCommitLog lists them."""
        if not self.storePathCommitLog:
            return [self.root / "commitlog"]
        return [Path(p.strip()) for p in self.storePathCommitLog.split(MULTI_PATH_SPLITTER) if p.strip()]

    def readonly_commitlog_dirs(self) -> list[Path]:
        if not self.readOnlyCommitLogStorePaths:
            return []
        return [Path(p.strip()) for p in self.readOnlyCommitLogStorePaths.split(MULTI_PATH_SPLITTER)
                if p.strip()]

    def consume_queue_file_size(self) -> int:
        """getMappedFileSizeConsumeQueue: rounded up to whole 20-byte units."""
        units = -(-self.mappedFileSizeConsumeQueue // CQ_UNIT_SIZE)
        return units * CQ_UNIT_SIZE

    def disk_max_used_space_ratio(self) -> int:
        """getDiskMaxUsedSpaceRatio: clamped to 10..95."""
        return min(max(self.diskMaxUsedSpaceRatio, 10), 95)

    def delay_levels_ms(self) -> list[int]:
        """messageDelayLevel parsed as ScheduleMessageService does (s, m, h, d units)."""
        units = {"s": 1000, "m": 60000, "h": 3600000, "d": 86400000}
        levels = []
        for word in self.messageDelayLevel.split():
            unit = word[-1]
            if unit not in units or not word[:-1].isdigit():
                raise UsageError(f"messageDelayLevel: cannot read {word!r} (number then s, m, h or d)")
            levels.append(int(word[:-1]) * units[unit])
        return levels

    @property
    def is_5x(self) -> bool:
        return self.storeFormat.startswith("5")

    def effective_warnings(self) -> list[str]:
        """Values the broker silently changes, and what it uses instead."""
        notes = []
        ratio = self.disk_max_used_space_ratio()
        if ratio != self.diskMaxUsedSpaceRatio:
            notes.append(f"diskMaxUsedSpaceRatio={self.diskMaxUsedSpaceRatio} is clamped to {ratio} "
                         "(the broker accepts 10..95)")
        cq = self.consume_queue_file_size()
        if cq != self.mappedFileSizeConsumeQueue:
            notes.append(f"mappedFileSizeConsumeQueue={self.mappedFileSizeConsumeQueue} is rounded up "
                         f"to {cq} (whole 20-byte units)")
        return notes

    def replace(self, **changes) -> "StoreConfig":
        return dataclasses.replace(self, **changes)


_FIELDS = {f.name: f for f in dataclasses.fields(StoreConfig) if f.name not in ("extra", "origins")}
# 4.9.8 reads the disk levels from JVM system properties as fractions.
_JVM_ALIASES = {
    "rocketmq.broker.diskSpaceWarningLevelRatio": "diskSpaceWarningLevelRatio",
    "rocketmq.broker.diskSpaceCleanForciblyRatio": "diskSpaceCleanForciblyRatio",
}


# settings with a closed set of values: anything else is a usage error, never a silent default
_CHOICES = {
    "storeFormat": ("4", "5"),
    "flushDiskType": ("SYNC_FLUSH", "ASYNC_FLUSH"),
    "brokerRole": ("ASYNC_MASTER", "SYNC_MASTER", "SLAVE"),
}


def unknown_settings(settings: dict) -> list[str]:
    """The keys of settings that mqtool does not know (a typo on the command line, most likely)."""
    return [key for key in settings if key not in _FIELDS and key not in _JVM_ALIASES]


def _convert(name: str, raw: str, where: str):
    kind = _FIELDS[name].type
    text = raw.strip()
    if name in _CHOICES and text not in _CHOICES[name]:
        raise UsageError(f"{where}: {name} must be one of {', '.join(_CHOICES[name])}, not {text!r}")
    if "bool" in kind:
        if text.lower() in ("true", "false"):
            return text.lower() == "true"
        raise UsageError(f"{where}: {name} must be true or false, not {text!r}")
    if kind.startswith("int"):
        try:
            return int(text)
        except ValueError:
            raise UsageError(f"{where}: {name} must be a whole number, not {text!r}") from None
    return text


def apply_settings(config: StoreConfig, settings: dict[str, str], where: str = "option") -> StoreConfig:
    """Return config with RocketMQ-named settings applied (values as text)."""
    changes, extra = {}, dict(config.extra)
    for key, value in settings.items():
        if key in _JVM_ALIASES:
            name = _JVM_ALIASES[key]
            try:
                changes[name] = round(float(value) * 100)
            except ValueError:
                raise UsageError(f"{where}: {key} must be a fraction such as 0.85, not {value!r}") from None
        elif key in _FIELDS:
            changes[key] = _convert(key, value, where)
        else:
            extra[key] = value
    return dataclasses.replace(config, extra=extra, **changes)


BROKER_CONF_LIMIT = 16 << 20   # a broker.conf is a few KiB; this is far beyond any real one


def read_broker_conf(path) -> list[tuple[int, str, str]]:
    """A broker.conf's settings as (line, key, value), read as java.util.Properties reads it (a
    later line of a key wins); a missing or unreadable file is a usage error naming it.  The one
    reader of a broker.conf."""
    try:
        text = fsutil.read_whole(path, BROKER_CONF_LIMIT).decode("iso-8859-1")   # as Properties.load reads it
    except OSError as exc:
        raise UsageError(f"cannot read broker config: {exc.strerror or exc}", path=path) from None
    return parse_properties(text)


def load_broker_conf(path, base: StoreConfig | None = None) -> StoreConfig:
    """Read a broker.conf; a missing or unreadable file is a usage error naming it."""
    config = base or StoreConfig()
    settings = {}
    for line, key, value in read_broker_conf(path):
        settings[key] = value
        if key in _FIELDS:
            _convert(key, value, f"{path} line {line}")  # report bad values with their line
    config = apply_settings(config, settings, str(path))
    return config


def config_for_store(root, conf_path=None, overrides: dict[str, str] | None = None) -> StoreConfig:
    """The configuration a command uses for the store at root."""
    config = StoreConfig()
    if conf_path:
        config = load_broker_conf(conf_path, config)
    if root is not None:
        config = config.replace(storePathRootDir=os.fspath(root))
    if overrides:
        config = apply_settings(config, overrides)
    for name in SIZE_SETTINGS + ("mapperFileSizeBatchConsumeQueue",):
        value = getattr(config, name)
        if value is not None and value <= 0:
            raise UsageError(f"{name} must be above 0, not {value}")
    return config


SIZE_SETTINGS = ("mappedFileSizeCommitLog", "mappedFileSizeConsumeQueue", "maxHashSlotNum", "maxIndexNum",
                 "mappedFileSizeTimerLog", "mappedFileSizeConsumeQueueExt")
"""The settings that give the store's file sizes (and with them its file layout)."""
