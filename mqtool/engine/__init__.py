"""The embedded store: what writes a store a real broker loads.

store (open, lock, put, close) with combine (concurrent puts in batches), commitlogwriter
(encoding and appending records), batchappend (the compiled batch path), dispatch and
indexservice (consume queue units and index entries), flush (group commit, async flush),
recovery, redispatch and rebuild (normal and abnormal recovery, rebuilding queues), quarantine
(keeping what a repair cuts), reclaim/ (expiry and retention) with trash and diskusage,
storecheckpoint, epochfile (the controller's epoch file kept with the commitlog), clock, message (a
message before it is stored) and javamap (Java's HashMap
order).  Imports storage/, native/, formats/ and errors; never click or rich.
"""
