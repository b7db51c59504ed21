from ._halflife import (
    DB as DB,
    BackupEngine as BackupEngine,
    Cursor as Cursor,
    Error as Error,
    Snapshot as Snapshot,
    WriteBatch as WriteBatch,
    POLICIES as POLICIES,
)

__all__ = ["DB", "BackupEngine", "Cursor", "Error", "Snapshot", "WriteBatch", "POLICIES"]
