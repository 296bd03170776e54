"""Tables owned by `failatlas.core.llm`: the response cache and the log of every call (docs/store/llm.md)."""

from failatlas.core.store import Migration

MIGRATIONS = [
    Migration(
        package="bench_core.llm",
        version=1,
        name="llm_cache_and_calls",
        sql="""
        CREATE TABLE llm_cache (
            key VARCHAR PRIMARY KEY, -- sha256(endpoint, model, messages, params, schema, sample_index)
            role VARCHAR NOT NULL,             -- role of the call that first filled this entry
            endpoint VARCHAR NOT NULL,         -- base URL, credentials stripped
            model VARCHAR NOT NULL,
            sample_index INTEGER NOT NULL,
            request JSON NOT NULL,             -- messages, params, schema (API keys redacted)
            response JSON NOT NULL,            -- the raw chat.completion object (API keys redacted)
            prompt_tokens INTEGER,
            completion_tokens INTEGER,
            cost_usd DOUBLE,                   -- what the original call cost; NULL: no price set
            created_at TIMESTAMP NOT NULL DEFAULT current_timestamp
        );
        CREATE TABLE llm_calls (
            id VARCHAR PRIMARY KEY,            -- uuid4 hex
            key VARCHAR NOT NULL,              -- llm_cache.key (a row there only if status = ok)
            role VARCHAR NOT NULL,             -- agent | judge | monitor | extractor | labeller | default
            run_id VARCHAR,                    -- runs.id when the caller gave one
            purpose VARCHAR,                   -- free text from the caller, e.g. 'judge:design attempt 2'
            endpoint VARCHAR NOT NULL,
            model VARCHAR NOT NULL,
            sample_index INTEGER NOT NULL,
            status VARCHAR NOT NULL,           -- ok | error
            cached BOOLEAN NOT NULL,           -- answered from llm_cache without an HTTP request
            http_attempts INTEGER NOT NULL,    -- HTTP requests sent (0 on a cache hit)
            error_kind VARCHAR,                -- rate_limit|server_error|timeout|connection|client_error
            http_status INTEGER,               -- status of the last failed HTTP reply, if any
            error VARCHAR,                     -- message of the final failure (API keys redacted)
            request JSON,                      -- only when status = error (otherwise see llm_cache.request)
            prompt_tokens INTEGER,             -- usage reported by the response (also on a cache hit)
            completion_tokens INTEGER,
            cost_usd DOUBLE,                   -- what this call cost: 0 on a cache hit; NULL: no price
            latency_s DOUBLE NOT NULL,         -- wall time of the call, retries and back-off included
            created_at TIMESTAMP NOT NULL DEFAULT current_timestamp
        );
        """,
    ),
]
