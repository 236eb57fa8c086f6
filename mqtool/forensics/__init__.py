"""Reading a store to judge it: verify/ (verify-crc's checks), lookup (by key, id and queue
offset), storeinfo (info's census), messageview (a record as fields), dumpkinds (dump as a table
of kinds) and dumpwalk (dump's walking, filtering and counting).  Read-only; imports the engine
only for its rules (reclaim's policy), never click or rich.
"""
