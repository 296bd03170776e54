"""The benchmark core: tasks, masked repositories, sandboxes, agents, runs and their scoring."""
