"""Tables owned by `embed` (docs/store/embed.md): embedding sets (model, revision, normalisation, dimension) and
their vectors, cached by content.

Vectors live in one table per dimension, `embedding_vectors_<dim>` with a fixed-size `FLOAT[dim]` column, named
by `embedding_sets.vectors_table`; embed/writes.py creates the table of a new dimension when its first set
appears. Migration 2 creates the tables of the two models FailAtlas ships (384: all-MiniLM-L6-v2, 768:
all-mpnet-base-v2) and moves the vectors of the old `embeddings` table into sets; vectors of any other
dimension keep their variable-length lists in `embedding_vectors_legacy`, read the same way.
"""

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
    Migration(
        package="embed",
        version=2,
        name="embedding_sets",
        sql="""
        CREATE TABLE embedding_sets (
            id VARCHAR PRIMARY KEY,            -- 'es-' + sha256(model U+001F revision U+001F normalisation)[:12]
            model VARCHAR NOT NULL,            -- model name or path as given
            revision VARCHAR NOT NULL,         -- model revision / package version / weights hash
            normalisation VARCHAR NOT NULL,    -- 'none' or the normaliser's name and version
            dim INTEGER NOT NULL,
            vectors_table VARCHAR NOT NULL,    -- embedding_vectors_<dim> (or embedding_vectors_legacy)
            created_at TIMESTAMP NOT NULL DEFAULT current_timestamp,
            UNIQUE (model, revision, normalisation)
        );
        CREATE TABLE embedding_vectors_384 (
            set_id VARCHAR NOT NULL,           -- embedding_sets.id
            text_hash VARCHAR NOT NULL,        -- sha256 of the text actually embedded (after normalisation)
            vector FLOAT[384] NOT NULL
        );
        CREATE TABLE embedding_vectors_768 (
            set_id VARCHAR NOT NULL,
            text_hash VARCHAR NOT NULL,
            vector FLOAT[768] NOT NULL
        );
        CREATE TABLE embedding_vectors_legacy (
            set_id VARCHAR NOT NULL,
            text_hash VARCHAR NOT NULL,
            vector FLOAT[] NOT NULL            -- vectors of other dimensions embedded before embedding sets
        );
        INSERT INTO embedding_sets (id, model, revision, normalisation, dim, vectors_table, created_at)
        SELECT 'es-' || left(sha256(model || chr(31) || revision || chr(31) || normalisation), 12),
               model, revision, normalisation, max(dim),
               CASE max(dim) WHEN 384 THEN 'embedding_vectors_384' WHEN 768 THEN 'embedding_vectors_768'
                    ELSE 'embedding_vectors_legacy' END,
               min(created_at)
        FROM embeddings GROUP BY model, revision, normalisation;
        INSERT INTO embedding_vectors_384 (set_id, text_hash, vector)
        SELECT s.id, e.text_hash, e.vector::FLOAT[384] FROM embeddings e
        JOIN embedding_sets s USING (model, revision, normalisation) WHERE s.vectors_table = 'embedding_vectors_384';
        INSERT INTO embedding_vectors_768 (set_id, text_hash, vector)
        SELECT s.id, e.text_hash, e.vector::FLOAT[768] FROM embeddings e
        JOIN embedding_sets s USING (model, revision, normalisation) WHERE s.vectors_table = 'embedding_vectors_768';
        INSERT INTO embedding_vectors_legacy (set_id, text_hash, vector)
        SELECT s.id, e.text_hash, e.vector FROM embeddings e
        JOIN embedding_sets s USING (model, revision, normalisation)
        WHERE s.vectors_table = 'embedding_vectors_legacy';
        DROP TABLE embeddings;
        """,
    ),
    Migration(
        package="embed",
        version=3,
        name="embedding_set_provenance",
        sql="""
        CREATE TABLE embedding_set_provenance (
            set_id VARCHAR PRIMARY KEY,        -- embedding_sets.id of a set made with a tuned model folder
            provenance VARCHAR NOT NULL        -- JSON: the folder's failatlas_tune.json when the set was made
        );
        """,
    ),
]
