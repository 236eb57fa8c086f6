"""Builders and expectations the tests share: crafted stores, damage, generated LMQ and timer stores,
the pipeline's expected rows, and the worker a torture test kills."""
