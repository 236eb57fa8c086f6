"""Rows for people and tools: plan (stores and their partitions, one a file), schema (the rows'
columns), rows (a partition's rows, one read path for every engine), local (the local engine),
engines (the Engine protocol and open_engine), arrow (Arrow schemas and batches: pyarrow only),
exporter, storestats, report, and spark/ (the Spark engine, data sources and JVM reader: the only
modules that import pyspark, loaded by name, only for --engine spark).  Never click or rich.
"""
