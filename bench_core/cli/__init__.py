"""The `failatlas tasks`, `sandbox` and `bench` commands: thin layers over the benchmark core."""
