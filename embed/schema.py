"""Tables owned by `embed`: embedding vectors cached by content (documented in docs/STORE.md)."""

from failatlas.core.store import Migration

MIGRATIONS = [
    Migration(
        package="embed",
        version=1,
        name="embeddings",
        sql="""
        CREATE TABLE embeddings (
            text_hash VARCHAR NOT NULL,        -- sha256 of the text actually embedded (after normalisation)
            model VARCHAR NOT NULL,            -- model name or path as given
            revision VARCHAR NOT NULL,         -- model revision / package version / weights hash
            normalisation VARCHAR NOT NULL,    -- 'none' or the normaliser's name and version
            dim INTEGER NOT NULL,
            vector FLOAT[] NOT NULL,
            created_at TIMESTAMP NOT NULL DEFAULT current_timestamp,
            PRIMARY KEY (text_hash, model, revision, normalisation)
        );
        """,
    ),
]
