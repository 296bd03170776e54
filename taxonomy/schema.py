"""Tables owned by `taxonomy`: versioned taxonomy snapshots, their failure types and categories, and which
failure type each insight belongs to (documented in docs/store/taxonomy.md)."""

from failatlas.core.store import Migration

MIGRATIONS = [
    Migration(
        package="taxonomy",
        version=1,
        name="taxonomies",
        sql="""
        CREATE TABLE taxonomies (
            id VARCHAR PRIMARY KEY,            -- 'tx-' + 10 hex digits: hash of inputs, params, time
            version INTEGER NOT NULL,          -- 1, 2, 3 ... in build order: the snapshot number people cite
            clustering_ids JSON NOT NULL,      -- clusterings.id the snapshot was built from
            embed_model VARCHAR NOT NULL,      -- embeddings.model the centroids live in
            normalisation VARCHAR NOT NULL,    -- embeddings.normalisation ('none', 'mask-v1')
            params JSON NOT NULL,              -- labeller and its arguments, thresholds, seeds
            code_version VARCHAR NOT NULL,
            created_at TIMESTAMP NOT NULL DEFAULT current_timestamp
        );
        CREATE TABLE failure_categories (
            taxonomy_id VARCHAR NOT NULL,
            id VARCHAR NOT NULL,               -- '<phase>/C<n>'
            phase VARCHAR NOT NULL,
            name VARCHAR NOT NULL,
            definition VARCHAR NOT NULL,
            keywords JSON NOT NULL,
            naming_method VARCHAR NOT NULL,    -- offline | llm | offline-after-llm-error
            prompt JSON,                       -- messages sent to the LLM labeller (NULL offline)
            raw_reply VARCHAR,                 -- the labeller's raw reply (NULL offline)
            PRIMARY KEY (taxonomy_id, id)
        );
        CREATE TABLE failure_types (
            taxonomy_id VARCHAR NOT NULL,
            id VARCHAR NOT NULL,               -- '<phase>/T<nn>' ('unassigned' is reserved)
            phase VARCHAR NOT NULL,
            category_id VARCHAR NOT NULL,      -- failure_categories.id
            name VARCHAR NOT NULL,
            definition VARCHAR NOT NULL,
            inclusion_criteria JSON NOT NULL,  -- list of strings
            examples JSON NOT NULL,            -- [{insight_id, text, similarity}], most central first
            keywords JSON NOT NULL,            -- c-TF-IDF terms, best first
            centroid FLOAT[] NOT NULL,         -- unit-length mean of the members' embeddings
            n_insights INTEGER NOT NULL,       -- members at build time
            merged_from JSON NOT NULL,         -- ['<clustering_id>:<cluster>', ...] behind it
            naming_method VARCHAR NOT NULL,    -- offline | llm | offline-after-llm-error
            prompt JSON,                       -- messages sent to the LLM labeller (NULL offline)
            raw_reply VARCHAR,                 -- the labeller's raw reply (NULL offline)
            PRIMARY KEY (taxonomy_id, id)
        );
        CREATE TABLE insight_failure_types (
            taxonomy_id VARCHAR NOT NULL,
            insight_id VARCHAR NOT NULL,       -- insights.id
            failure_type_id VARCHAR NOT NULL,  -- failure_types.id or 'unassigned'
            similarity DOUBLE,                 -- cosine to the type's centroid (NULL when no vector)
            method VARCHAR NOT NULL,           -- cluster | nearest_centroid | unassigned
            assigned_at TIMESTAMP NOT NULL DEFAULT current_timestamp,
            PRIMARY KEY (taxonomy_id, insight_id)
        );
        """,
    ),
    Migration(
        package="taxonomy",
        version=2,
        name="taxonomies_embedding_set",
        sql="""
        ALTER TABLE taxonomies ADD COLUMN embedding_set_id VARCHAR;  -- embedding_sets.id the centroids live in
        UPDATE taxonomies SET embedding_set_id = c.embedding_set_id FROM clusterings c
        WHERE c.id = json_extract_string(taxonomies.clustering_ids, '$[0]');
        """,
    ),
    Migration(
        package="taxonomy",
        version=3,
        name="failure_types_origin",
        sql="""
        -- where a type comes from: 'cluster' (unseeded build), 'seed' (a category of the seed taxonomy the build
        -- was given) or 'new' (clustered from the insights the seed did not explain)
        ALTER TABLE failure_types ADD COLUMN origin VARCHAR DEFAULT 'cluster';
        -- per phase of a seeded build: insights, how many the seed explains, the calibrated threshold
        ALTER TABLE taxonomies ADD COLUMN seed_reports JSON;
        -- who named the types: {"model", "endpoint"} of the LLM labeller (host only, never a key); NULL offline
        ALTER TABLE taxonomies ADD COLUMN labelled_by JSON;
        -- a person's edits (rename, merge, split), kept across rebuilds: each names the types it touched by their
        -- members when it was made, and a rebuild applies it to the new types that hold most of those members
        CREATE TABLE taxonomy_edits (
            id INTEGER PRIMARY KEY,            -- 1, 2, 3 ... in the order edits are applied
            created_at TIMESTAMP NOT NULL DEFAULT current_timestamp,
            action VARCHAR NOT NULL,           -- rename | merge | split
            phase VARCHAR NOT NULL,
            anchors JSON NOT NULL,             -- [[insight id, ...], ...]: members of each type the edit names
            args JSON NOT NULL,                -- rename: {name, definition}; merge: {name}; split: {k}
            made_on VARCHAR NOT NULL           -- taxonomies.id the edit was made on
        );
        """,
    ),
    Migration(
        package="taxonomy",
        version=4,
        name="insight_labels",
        sql="""
        -- a person's labels (`failatlas label`, `--labels FILE`, the app): keyed by the insight's content, so a
        -- label survives `taxonomy build` and a re-run of `ingest`, and applies to every insight with that text;
        -- `taxonomy build` learns from them (with a seed's examples). Labels imported data carries
        -- (insight_sources.label) are not here: those are ground truth for evaluation only.
        CREATE TABLE insight_labels (
            text_hash VARCHAR PRIMARY KEY,     -- ingest's text_hash of the normalised text (16 hex digits)
            text VARCHAR NOT NULL,             -- the insight's text as it was labelled
            label VARCHAR NOT NULL,            -- a category as the person spells it (a seed's, or a new name)
            source VARCHAR NOT NULL,           -- how it was given: insight | type <taxonomy>/<type> | file <name> | app
            created_at TIMESTAMP NOT NULL DEFAULT current_timestamp
        );
        """,
    ),
    Migration(
        package="taxonomy",
        version=5,
        name="taxonomies_current_since",
        sql="""
        -- when the snapshot last became current: set when it is built, and again when a build finds it already
        -- stored (a label removed, then `taxonomy build`: the first build comes back). Readers that open "the
        -- newest" open the current one: the latest current_since (created_at where it is NULL), then the version.
        ALTER TABLE taxonomies ADD COLUMN current_since TIMESTAMP;
        """,
    ),
]
