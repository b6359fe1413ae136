"""The durable log: record batches in segment files, an offset index, recovery and checkpoints.

A partition's directory holds `<base offset>.log` segments of raw record batches (magic v2, exactly
as clients sent them, with base offset and partition leader epoch rewritten by the leader — neither
is covered by the CRC), `<base offset>.index` files (sparse: batch base offset → file position),
`hw-checkpoint` and `leader-epoch-checkpoint`.
"""
