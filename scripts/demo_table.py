"""The README's demo table, generated from a demo store (issue 41): per phase and failure type, its category, the
objects it failed on, its occurrences, its share of the phase and the runs it affected.

    failatlas --db failatlas.duckdb demo                        # a fresh demo (writes failatlas.duckdb)
    python3 scripts/demo_table.py --db failatlas.duckdb           # print the table
    python3 scripts/demo_table.py --db failatlas.duckdb --write README.md   # replace the README's table
    python3 scripts/demo_table.py --db failatlas.duckdb --check README.md   # exit 1 when the README differs

The table sits in README.md between the markers `<!-- demo-table:begin -->` and `<!-- demo-table:end -->`.
Every cell comes from `prevalence_table` (the frame every export renders) and `facets.with_objects`, so it is the
exported `prevalence.md` without the intervals. `tests/taxonomy/test_demo_table.py` runs this script on the demo's
real runs and checks that the README's table equals its output.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

BEGIN, END = "<!-- demo-table:begin -->", "<!-- demo-table:end -->"
HEADERS = ["Phase", "Category", "Failure type", "Objects", "n", "Share (%)", "Runs affected"]


def demo_table(db: Path, taxonomy: str | None = None) -> str:
    """The table as Markdown, for the newest taxonomy of the store at `db` (or `taxonomy`)."""
    from failatlas.store import open_store
    from failatlas.taxonomy import prevalence_table
    from failatlas.taxonomy.facets import with_objects
    from failatlas.taxonomy.tables import one_line, pct

    store = open_store(db)
    frame = with_objects(store, prevalence_table(store, taxonomy))
    lines = ["| " + " | ".join(HEADERS) + " |", "|---|---|---|---|---:|---:|---:|"]
    for r in frame.iter_rows(named=True):
        runs = "" if r.get("runs_count") is None else f"{r['runs_count']}/{r['runs_total']}"
        cells = [r["phase"], r["category"] or "", r["failure_type"] or r["failure_type_id"], r["objects"],
                 str(r["count"]), pct(r["share"]), runs]
        lines.append("| " + " | ".join(one_line(c).replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines) + "\n"


def readme_table(text: str) -> str:
    """The table between the markers of a README's text; ValueError when the markers are missing."""
    start, end = text.find(BEGIN), text.find(END)
    if start < 0 or end < start:
        raise ValueError(f"no table between {BEGIN} and {END}")
    return text[start + len(BEGIN):end].strip("\n") + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--db", type=Path, required=True, help="a demo store (failatlas demo's --db)")
    ap.add_argument("--taxonomy", help="taxonomy id or version (default: the newest)")
    group = ap.add_mutually_exclusive_group()
    group.add_argument("--write", type=Path, metavar="README", help="replace the table in this README")
    group.add_argument("--check", type=Path, metavar="README", help="exit 1 when this README's table differs")
    args = ap.parse_args(argv)
    table = demo_table(args.db, args.taxonomy)
    if args.write:
        text = args.write.read_text(encoding="utf-8")
        readme_table(text)  # the markers must be there
        start, end = text.find(BEGIN) + len(BEGIN), text.find(END)
        args.write.write_text(text[:start] + "\n" + table + text[end:], encoding="utf-8")
    elif args.check:
        found = readme_table(args.check.read_text(encoding="utf-8"))
        if found != table:
            print(f"{args.check}'s demo table differs from the demo's:\n--- README\n{found}--- demo\n{table}",
                  file=sys.stderr)
            return 1
    else:
        sys.stdout.write(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
