"""The rows of the reliability table: every behaviour or fault the suite proves, and what must happen.

Each test records its row's observed outcome and the store's row counts before and after (conftest.py);
`make_table.py` renders docs/reliability.md from what a run recorded. `test_doc.py` keeps the doc in step.
"""

from __future__ import annotations

ROWS: dict[str, tuple[str, str, str]] = {
    # id: (area, behaviour or fault, expected outcome)
    "hostile-read-ground-truth": ("hostile agent", "read the ground truth or the reference tree",
                                  "nothing found in the sandbox; monitor ground_truth_access"),
    "hostile-git-history": ("hostile agent", "read git history",
                            "no removed code in any git object; monitor git_history"),
    "hostile-network": ("hostile agent", "reach the network", "every connection fails; monitor network"),
    "hostile-fork-bomb": ("hostile agent", "fork bomb", "killed_reason pids; sandbox usable afterwards"),
    "hostile-memory": ("hostile agent", "allocate memory without end", "killed_reason oom (exit 137)"),
    "hostile-fill-disk": ("hostile agent", "fill the disk",
                          "/tmp bounded (tmpfs size or memory limit); stored conclusion capped at 1 MiB, "
                          "diff at 8 MiB"),
    "hostile-infinite-loop": ("hostile agent", "loop forever (and an escaped setsid loop)",
                              "killed_reason timeout at the deadline; escaped loop killed"),
    "hostile-print-flood": ("hostile agent", "print gigabytes to stdout",
                            "killed_reason timeout; output truncated to the cap"),
    "hostile-write-outside": ("hostile agent", "write outside the workspace",
                              "permission denied; escaping links dropped; host untouched"),
    "hostile-signal-harness": ("hostile agent", "signal or reach the harness process",
                               "kill 1 refused; no Docker socket; run completed, harness alive"),
    "hostile-fake-results": ("hostile agent", "fake a results file",
                             "validator fabricated_result; monitor fabricated_results"),
    "hostile-tamper-trace": ("hostile agent", "tamper with the trace (rewrite git, fake trace, control bytes)",
                             "diff taken on the host shows the edit; every command traced"),
    "bystander": ("hostile agent", "a gold run in the same batch as the hostile ones",
                  "completed, validator passed"),
    "sigkill-resume": ("fault", "runner killed with SIGKILL midway, then re-run",
                       "every run stored exactly once; no container left"),
    "llm-429": ("fault", "LLM endpoint answers 429 then succeeds", "retried (Retry-After), reply used"),
    "llm-500": ("fault", "LLM endpoint answers 500 every time", "LLMEndpointError (infrastructure), calls logged"),
    "llm-timeout": ("fault", "LLM endpoint times out", "LLMEndpointError kind timeout, calls logged"),
    "llm-truncated": ("fault", "LLM reply truncated JSON", "repaired by a retry, or judge_failed"),
    "llm-malformed": ("fault", "LLM HTTP body not JSON", "retried as a server error, then reply used"),
    "oom-validator": ("fault", "clean re-run's container killed for memory", "validator oom"),
    "docker-refuses": ("fault", "Docker daemon refuses a call (dead DOCKER_HOST)",
                       "run infra_error; --retry-infra completes it"),
    "judge-crash": ("fault", "LLM judge fails halfway through a batch (500s, malformed JSON)",
                    "judge_failed with the reason; other runs scored; re-scoring completes"),
    "fuzz-task-import": ("bad input", "fuzzed task files (AutoExperiment JSONL)",
                         "InputError naming the file; store unchanged"),
    "fuzz-insight-import": ("bad input", "fuzzed insight and trace files (JSONL, CSV, EXP-Bench judge outputs, "
                            "Inspect logs, TRAIL)",
                            "InputError naming file and line; store unchanged"),
    "fuzz-taxonomy-export": ("bad input", "fuzzed taxonomy phase, category and failure-type names in exports",
                             "valid CSV/Markdown/LaTeX, every row kept"),
    "secret-api-key": ("security", "an API key planted in the environment",
                       "never in the store, traces, exports or logs"),
    "secret-ground-truth": ("security", "ground truth of the task",
                            "absent from the agent's sandbox (files and environment)"),
    "app-read-only": ("security", "the app over the store", "opens it read-only; runs no user-supplied SQL"),
    "concurrency": ("concurrency", "2 workers writing while the app and a reader poll",
                    "no lock errors, no lost writes"),
    # Issue 15: what a red team broke, closed (tests in test_attack_*.py)
    "attack-shadow-hidden-tests": ("hostile agent",
                                   "fake the hidden tests: a pytest.py, conftest.py, sitecustomize.py, .pth file or "
                                   "plugin in the repository, a forged result line, a left-over process rewriting "
                                   "the test",
                                   "verdict from a fresh sandbox holding only the diff; runner and tests out of "
                                   "reach; hidden tests fail; monitor test_infrastructure"),
    "attack-output-not-a-file": ("hostile agent", "make an output file a folder, a FIFO or a symlink loop",
                                 "agent_error, scored as failing and counted; not retried as infrastructure"),
    "attack-diff-round-trip": ("agent output", "added, empty, deleted, renamed, binary and mode-changed files",
                               "the diff applies with git apply and reproduces the final tree"),
    "attack-task-paths": ("hostile task", "paths in a task file: absolute, '..', links out of the task or repository",
                          "InputError naming the field on import; no host file read, copied or deleted"),
    "attack-symlink-chain": ("hostile agent", "chains of links that escape only once all exist",
                             "no link in the copied-out tree resolves outside it"),
    "attack-huge-files": ("hostile agent", "sparse and huge files (a 3 GB sparse conclusion, GBs in the workspace)",
                          "sizes checked before reading; caps applied and recorded; bounded memory; not infra_error"),
    "attack-read-as-root": ("hostile agent", "output files that are links to root-only files (/etc/shadow)",
                            "read as the agent's user without following links; nothing root-only stored"),
    "attack-app-network": ("security", "the app and host services from a sandbox with network",
                           "app bound to 127.0.0.1 (--address to change); sandbox cannot reach the host's services"),
    "attack-import-bombs": ("bad input", "zip bomb, one huge line or insight, JSON nested 100k deep",
                            "one-line InputError naming file and line; nothing written; bounded memory"),
    "attack-app-markup": ("security", "Markdown and HTML in task, run and insight texts shown by the app",
                          "rendered as text: no image fetched, no link or HTML rendered"),
    "attack-command-braces": ("agent", "a command agent's command with braces (JSON, ${VAR}, {1..3}, awk)",
                              "passed to the shell unchanged; the old {prompt_file}/{prompt} placeholders refused "
                              "with a ConfigError naming $FAILATLAS_PROMPT_FILE"),
    # Issue 29: verdicts from evidence the agent's code cannot reach (tests in test_attack_values.py, _scores.py)
    "attack-results-numbers": ("hostile agent", "a results file with a 400- or 5000-digit integer, NaN, 1e999 or a "
                               "lone surrogate",
                               "that run's failure (runtime_error or wrong_value); every other run scored"),
    "attack-output-json": ("hostile agent", "design.json nested 200,000 levels, with a 5000-digit integer or a lone "
                           "surrogate",
                           "run stored (not infra_error), design recorded unreadable, design phase failed"),
    "attack-import-values": ("bad input", "insight and task files with a 5000-digit integer, a lone surrogate, "
                             ".inf/.nan expected values or tolerances",
                             "one-line error naming file, line and field; nothing written"),
    "attack-verdicts": ("hostile agent", "every hostile agent on every CPU mini task (forged summaries, sprayed "
                        "conclusions and designs, constants, huge and deep outputs, sandbox attacks)",
                        "at most null's score on each phase M, D, I, E, C; every run stored and scored"),
}
