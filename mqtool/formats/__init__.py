"""Byte layouts of every RocketMQ store file, as construct schemas.

One module per file kind.  The schemas are the single source of truth; the
fast decoders next to them (plain struct, for hot loops) are tested against
them in tests/test_formats_roundtrip.py.
"""
