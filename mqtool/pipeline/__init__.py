"""Rows for people and tools: engines (stores, parts, rows, filters, the local engine), arrow
(Arrow schemas and batches: pyarrow only), exporter, storestats, and sparksource, the only module
that imports pyspark (loaded by name, only for --engine spark).  Never click or rich.
"""
