from ._halflife import DB as DB, Error as Error, Snapshot as Snapshot, WriteBatch as WriteBatch, POLICIES as POLICIES
