"""The bottom layer, which imports no stage: the DuckDB store and its migrations, the error hierarchy, stage-run
records, registries, text hashing, LaTeX escaping, the CLI plumbing and the one LLM client layer."""
