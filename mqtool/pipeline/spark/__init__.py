"""mqtool on Apache Spark, loaded by name only when `--engine spark` is asked for: `sources` (the
`rocketmq` and `rocketmq_cq` PySpark data sources), `session` (mqtool's Spark session), `engine`
(the Spark engine and export with Spark's writer), and the JVM reader of `format("rocketmq")`:
`jvmreader` (its jar, from `jvm/*.java`), `rowserver` (the Python process it asks) and `answers`
(what the row server answers with: the data sources' own classes).  The modules of this package
are the only ones in mqtool that import pyspark; this file imports nothing (setup.py imports
jvmreader to build the jar, where pyspark may be missing).
"""
