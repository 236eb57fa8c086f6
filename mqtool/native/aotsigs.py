"""The argument types each kernel family is built for ahead of time (aot.py), in numba's own type
notation: those the JIT dispatchers were compiled for by the real calls (the commands and tests
on the fixtures), read-only arrays written as writable ones (the same code: the kernels never
write to those) and 'A' layout where a call passes a non-contiguous column.  A call whose
arrays differ runs the JIT kernel instead; tests/test_aot.py checks that none does on the
fixtures.  A kernel whose arguments change needs its line here changed with it."""

SIGNATURES = {
    'fastscan': {
        'scan_records': (
            "Array(uint8, 1, 'C')", 'int64', 'int64', 'int64', 'boolean', 'int64', "Array(int64, 1, 'C')",
            "Array(int64, 1, 'C')", "Array(int64, 1, 'C')", "Array(int64, 1, 'C')", "Array(int64, 1, 'C')",
            "Array(int64, 1, 'C')", "Array(int64, 1, 'C')", "Array(bool, 1, 'C')", "Array(int64, 1, 'C')",
            "Array(int64, 1, 'C')", "Array(int64, 1, 'C')", "Array(int64, 1, 'C')", "Array(int64, 1, 'C')",
            "Array(int64, 1, 'C')", "Array(int64, 1, 'C')", "Array(int64, 1, 'C')", 'boolean',
            "Array(int64, 1, 'C')", "Array(int64, 1, 'C')", "Array(int64, 1, 'C')", 'int64', "Array(int64, 1, 'C')",
            "Array(int64, 1, 'C')",
        ),
        # DLedger entries: scan_records' arguments, one record an entry, and the entries' index and term
        'scan_entries': None,
        'hop_to': (
            "Array(uint8, 1, 'C')", 'int64', 'int64', 'int64',
        ),
        'hop_entries': None,    # DLedger entries: hop_to's arguments
        'lower_bound': (
            "Array(uint8, 1, 'C')", 'int64', 'int64', 'int64', 'int64', 'int64',
        ),
        'parse_records': (
            "Array(uint8, 1, 'C')", 'int64', 'int64', "Array(int64, 1, 'C')", "Array(int64, 1, 'C')",
            "Array(int64, 1, 'C')", "Array(int64, 1, 'C')", "Array(int64, 1, 'C')", "Array(int64, 1, 'C')",
            "Array(int64, 1, 'C')", "Array(int64, 1, 'C')", 'int64', 'int64', "Array(int64, 1, 'C')",
            "Array(int64, 1, 'C')",
        ),
    },
    'columnar': {
        'decode': (
            "Array(uint8, 1, 'C')", 'int64', "Array(int64, 1, 'C')", "Array(int64, 1, 'C')", "Array(int64, 1, 'C')",
            "Array(int64, 1, 'C')", "Array(int64, 1, 'C')", "Array(int64, 1, 'C')", "Array(int64, 1, 'C')",
            "Array(int64, 1, 'C')", "Array(bool, 1, 'C')", 'boolean', "Array(uint8, 1, 'C')", "Array(uint8, 1, 'C')",
            "Array(uint8, 1, 'C')", "Array(uint8, 1, 'C')", "Array(int32, 1, 'C')", "Array(int32, 1, 'C')",
            "Array(int32, 1, 'C')", "Array(int64, 1, 'C')", "Array(int32, 1, 'C')", "Array(int64, 1, 'C')",
            "Array(int64, 1, 'C')", "Array(int64, 1, 'C')", "Array(int32, 1, 'C')", "Array(uint8, 1, 'C')",
            "Array(int32, 1, 'C')", "Array(uint8, 1, 'C')", "Array(int32, 1, 'C')", "Array(int32, 1, 'C')",
            "Array(uint8, 1, 'C')", "Array(int32, 1, 'C')", "Array(uint8, 1, 'C')", "Array(int32, 1, 'C')",
            "Array(uint8, 1, 'C')", "Array(bool, 1, 'C')", "Array(int32, 1, 'C')", "Array(uint8, 1, 'C')",
            "Array(bool, 1, 'C')", "Array(int32, 1, 'C')", "Array(uint8, 1, 'C')", "Array(bool, 1, 'C')",
            "Array(int32, 1, 'C')", "Array(uint8, 1, 'C')", "Array(int32, 1, 'C')", "Array(uint8, 1, 'C')",
            "Array(int32, 1, 'C')", "Array(uint8, 1, 'C')", "Array(int32, 1, 'C')", "Array(uint8, 1, 'C')",
            "Array(int64, 1, 'C')", "Array(int64, 1, 'C')", "Array(bool, 1, 'C')", "Array(int64, 1, 'C')",
        ),
    },
    'chunkstats': {
        'chunk_stats': (
            "Array(uint8, 1, 'C')", "Array(bool, 1, 'C')", "Array(int64, 1, 'C')", "Array(int64, 1, 'C')",
            "Array(int64, 1, 'C')", "Array(int64, 1, 'C')", "Array(int64, 1, 'C')", "Array(int64, 1, 'C')", 'int64',
        ),
        'hash_bytes': (
            "Array(uint8, 1, 'C')", 'int64', 'int64',
        ),
    },
    'jsonlines': {
        'render': (
            "Array(int64, 1, 'C')", "Array(int64, 1, 'C')", "Array(int64, 1, 'C')", "Array(int64, 1, 'C')",
            "Array(uint8, 1, 'C')", 'boolean', "Array(int64, 2, 'C')", "Array(int64, 2, 'C')",
            "Array(uint8, 1, 'C')", "Array(bool, 2, 'C')", "Array(int32, 1, 'C')", "Array(int32, 1, 'C')",
            "Array(uint8, 1, 'C')", "Array(int32, 1, 'C')", "Array(uint8, 1, 'C')", "Array(uint8, 1, 'C')",
        ),
    },
    'putlines': {
        'render_puts': (
            "Array(int64, 1, 'C')", "Array(int64, 1, 'C')", "Array(uint8, 1, 'C')", "Array(int64, 1, 'C')",
            "Array(int64, 1, 'C')", "Array(int64, 1, 'C')", "Array(int64, 1, 'C')", "Array(int64, 1, 'C')",
            "Array(int64, 1, 'C')", "Array(uint8, 1, 'C')", "Array(int64, 1, 'C')", "Array(int64, 1, 'C')",
            "Array(uint8, 1, 'C')", "Array(int64, 1, 'C')", "Array(uint8, 1, 'C')",
        ),
    },
    'specscan': {
        'scan_lines': (
            "Array(uint8, 1, 'C')", "Array(uint64, 1, 'C')", "Array(int64, 1, 'C')", "Array(int64, 1, 'C')",
            "Array(uint8, 1, 'C')", "Array(int64, 1, 'C')", "Array(int64, 1, 'C')", "Array(int64, 1, 'C')",
            "Array(int64, 1, 'C')", "Array(int8, 1, 'C')", "Array(int64, 1, 'C')", "Array(int64, 2, 'C')",
            "Array(int64, 2, 'C')", "Array(int64, 2, 'C')",
        ),
        'intern': (
            "Array(uint8, 1, 'C')", "Array(int64, 1, 'A')", "Array(int64, 1, 'A')", "Array(int8, 1, 'C')",
            "Array(int64, 1, 'C')",
        ),
        'build_columns': (
            "Array(uint8, 1, 'C')", "Array(int64, 1, 'C')", "Array(int64, 1, 'C')", "Array(int64, 2, 'C')",
            "Array(int64, 2, 'C')", "Array(int64, 2, 'C')", "Array(int64, 1, 'C')", "Array(uint8, 1, 'C')",
        ),
    },
    'append': {
        'write_records': (
            "Array(uint8, 1, 'C')", 'int64', 'int64', 'int64', 'int64', 'int64', 'int64', "Array(int64, 1, 'C')",
            "Array(int64, 1, 'C')", "Array(uint8, 1, 'C')", "Array(int64, 1, 'C')", "Array(int64, 1, 'C')",
            "Array(uint8, 1, 'C')", "Array(int64, 1, 'C')", "Array(int64, 1, 'C')", "Array(uint8, 1, 'C')",
            "Array(int64, 1, 'C')", "Array(int64, 1, 'C')", "Array(int64, 1, 'C')", "Array(uint8, 1, 'C')",
            "Array(int64, 1, 'C')", "Array(int64, 1, 'C')", "Array(int64, 1, 'C')", "Array(int64, 1, 'C')",
            "Array(int64, 1, 'C')", "Array(int64, 1, 'C')", "Array(int64, 1, 'C')", "Array(int64, 1, 'C')",
            "Array(int64, 1, 'C')", "Array(int64, 1, 'C')", "Array(int64, 1, 'C')", "Array(int64, 1, 'C')",
            "Array(int64, 1, 'C')", "Array(int64, 1, 'C')", "Array(bool, 1, 'C')", "Array(int64, 1, 'C')",
            "Array(int64, 1, 'C')",
        ),
        'insert_keys': (
            "Array(uint8, 1, 'C')", 'int64', 'int64', "Array(int64, 1, 'C')", 'int64', 'int64',
            "Array(int64, 1, 'C')", "Array(int64, 1, 'C')", "Array(int64, 1, 'C')",
        ),
    },
    'verify': {
        'check_units': (
            "Array(uint8, 1, 'C')", 'int64', 'int64', "Array(int64, 1, 'C')", "Array(int64, 1, 'C')",
            "Array(int64, 1, 'C')", "Array(int64, 1, 'C')", "Array(uint8, 1, 'C')", 'int64', 'boolean',
            "Array(int64, 1, 'C')", "Array(int64, 1, 'C')",
        ),
        'check_entries': (
            "Array(uint8, 1, 'C')", 'int64', 'int64', "Array(int64, 1, 'C')", "Array(int64, 1, 'C')",
            "Array(int64, 1, 'C')", "Array(int64, 1, 'C')",
        ),
        'index_structure': (
            "Array(uint8, 1, 'C')", 'int64', 'int64', "Array(int64, 1, 'C')", "Array(int64, 1, 'C')",
            "Array(int64, 1, 'C')",
        ),
        'units_by_records': (
            "UniTuple(Array(int64, 1, 'C'), 11)", "Array(uint8, 1, 'C')", 'int64', 'int64', "Array(int64, 1, 'C')",
            'int64', 'int64', 'int64', 'int64', 'boolean', "Array(int64, 1, 'C')", "Array(int64, 1, 'C')",
        ),
        'queue_runs': (
            "Array(int64, 1, 'C')", "Array(int64, 1, 'C')", "Array(int64, 1, 'C')", "Array(int64, 1, 'C')",
            "Array(bool, 1, 'C')", "Array(int64, 1, 'C')", "Array(int64, 2, 'C')", "Array(int64, 1, 'C')",
            "Array(int64, 1, 'C')",
        ),
        'unit_summary': (
            "Array(uint8, 1, 'C')", 'int64', 'boolean', "Array(int64, 1, 'C')", "Array(int64, 1, 'C')",
        ),
        'entries_by_records': (
            "Array(int64, 1, 'C')", "Array(int64, 1, 'C')", "Array(int64, 1, 'C')", "Array(int64, 1, 'C')",
            "Array(int64, 1, 'C')", "Array(int64, 1, 'C')", "Array(uint8, 1, 'C')", 'int64', 'int64', 'int64',
            "Array(int64, 1, 'C')", "Array(int64, 1, 'C')", "Array(int64, 1, 'C')", "Array(int64, 1, 'C')",
        ),
    },
}

SIGNATURES['fastscan']['scan_entries'] = SIGNATURES['fastscan']['scan_records'] + ("Array(int64, 1, 'C')",) * 2
SIGNATURES['fastscan']['hop_entries'] = SIGNATURES['fastscan']['hop_to']
