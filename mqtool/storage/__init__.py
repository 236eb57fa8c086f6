"""Reading a store's files: the layer every command stands on.

Mapped files and their queues (mappedfile, mappedfilequeue), the one commitlog walker
(commitlog), consume queues, index files, checkpoint and config JSON (consumequeue, indexfile,
metafiles), where each kind of file lives (layout), RocketMQ's store settings (config) and how a
command line's STORE, --config and --set become a layout (settings), times on the command line
(times), the census of what a store holds and which writers refuse it (census), the dispatch
request a record yields (dispatchrequest), topic name rules (topics), and
safe file-system calls (fsutil).  Imports only formats/ and errors.
"""
