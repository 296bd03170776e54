"""Tables owned by `cluster`: clusterings, assignments, the 2-D map, evaluations, cached reductions
(docs/store/cluster.md)."""

from failatlas.core.store import Migration

MIGRATIONS = [
    Migration(
        package="cluster",
        version=1,
        name="clusterings",
        sql="""
        CREATE TABLE clusterings (
            id VARCHAR PRIMARY KEY,
            phase VARCHAR,                     -- NULL when clustered across phases
            embed_model VARCHAR NOT NULL,
            params JSON NOT NULL,              -- every parameter, seed included
            n_insights INTEGER NOT NULL,
            n_clusters INTEGER NOT NULL,
            outlier_rate DOUBLE NOT NULL,
            stability_ari DOUBLE,              -- mean ARI between re-runs with other seeds / resamples
            stability JSON,
            code_version VARCHAR NOT NULL,
            created_at TIMESTAMP NOT NULL DEFAULT current_timestamp
        );
        CREATE TABLE cluster_assignments (
            clustering_id VARCHAR NOT NULL,    -- clusterings.id
            insight_id VARCHAR NOT NULL,       -- insights.id
            cluster INTEGER NOT NULL,          -- -1 = outlier
            reassigned BOOLEAN NOT NULL DEFAULT false,  -- outlier moved to its nearest cluster
            probability DOUBLE,
            x DOUBLE,                          -- 2-D projection for the app's map
            y DOUBLE,
            PRIMARY KEY (clustering_id, insight_id)
        );
        CREATE TABLE cluster_evaluations (
            clustering_id VARCHAR NOT NULL,
            label_column VARCHAR NOT NULL,
            metrics JSON NOT NULL,             -- ari, nmi, homogeneity, ... (cluster/metrics.py)
            created_at TIMESTAMP NOT NULL DEFAULT current_timestamp
        );
        """,
    ),
    Migration(
        package="cluster",
        version=2,
        name="cluster_reductions",
        sql="""
        CREATE TABLE cluster_reductions (
            key VARCHAR PRIMARY KEY,           -- sha256 of (vectors, reducer, its parameters, seed, library version)
            reducer VARCHAR NOT NULL,
            n_rows INTEGER NOT NULL,
            n_dims INTEGER NOT NULL,
            vectors BLOB NOT NULL,             -- float32, row-major, n_rows x n_dims
            used_at TIMESTAMP NOT NULL DEFAULT current_timestamp
        );
        """,
    ),
    Migration(
        package="cluster",
        version=3,
        name="clusterings_embedding_set",
        sql="""
        ALTER TABLE clusterings ADD COLUMN embedding_set_id VARCHAR;  -- embedding_sets.id of the clustered vectors
        UPDATE clusterings SET embedding_set_id = s.id FROM embedding_sets s
        WHERE s.model = clusterings.embed_model
          AND s.revision = json_extract_string(clusterings.params, '$.embed_revision')
          AND s.normalisation = coalesce(json_extract_string(clusterings.params, '$.normalisation'), 'none');
        """,
    ),
]
