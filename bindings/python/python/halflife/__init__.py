"""The halflife key-value engine from Python.

>>> import halflife
>>> with halflife.DB("/tmp/example-db", gc="lifetime") as db:
...     db[b"key"] = b"value"
...     db[b"key"]
b'value'
"""

from ._halflife import DB, BackupEngine, Cursor, Error, Snapshot, WriteBatch, POLICIES

__all__ = ["DB", "BackupEngine", "Cursor", "Error", "Snapshot", "WriteBatch", "POLICIES"]
