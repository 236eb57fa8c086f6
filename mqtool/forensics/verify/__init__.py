"""verify-crc: every byte of a store checked, and every reference between its files.

findings (what is reported), commitlog, queues and index (one scope each), run (tasks, threads,
the order of the report), kernels (the compiled checks the scopes share).  `verify` is the entry.
"""

from mqtool.forensics.verify.findings import SCOPES, Finding  # noqa: F401
from mqtool.forensics.verify.run import Summary, all_scopes, verify  # noqa: F401
