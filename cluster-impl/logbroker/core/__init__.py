"""The sans-IO broker core: request handling and partition state, with injected clock and storage.

Nothing in here opens a socket, sleeps, or reads the wall clock: the asyncio server (`server.py`)
feeds it requests and timer ticks, and a deterministic simulator can do the same.
"""
