"""`failatlas bench report`: metric tables per agent, model, task or benchmark, as Markdown, CSV and LaTeX.

The LaTeX is for a paper: it compiles in a plain `article` with booktabs and tabularx, fits \\textwidth, and so
splits the scores into one float per family (phase scores, conjunctive scores, pass@k when asked for), each cell
a mean over its CI in a smaller font, CIs abbreviated (`[.20, .80]`)."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from failatlas.bench_core.scoring.metrics import CONJUNCTIVE, PHASES, run_scores, summarise
from failatlas.core.errors import NotFoundError
from failatlas.core.store import Store
from failatlas.core.tables import fmt, latex_cell, paper_table, to_csv, to_markdown

GROUPINGS = {"agent": ["agent", "model"], "task": ["task_id", "agent", "model"], "benchmark": ["benchmark", "agent"],
             "fault": ["fault_injected", "agent"]}
METRICS = (*PHASES, *CONJUNCTIVE)


def report_table(store: Store, *, by: str = "agent", k: int | None = None, n_boot: int = 1000,
                 seed: int = 0) -> pl.DataFrame:
    if by not in GROUPINGS:
        raise NotFoundError(f"unknown grouping '{by}'", hint="use one of: " + ", ".join(GROUPINGS))
    scores = run_scores(store)
    if scores.height == 0:
        raise NotFoundError("no scored runs in the store",
                            hint="run `failatlas bench run` then `failatlas bench score`")
    return summarise(scores, GROUPINGS[by], n_boot=n_boot, seed=seed, k=k)


def _rows(table: pl.DataFrame, by: str, with_ci: bool, with_n: bool = True) -> tuple[list[str], list[list[object]]]:
    keys = GROUPINGS[by]
    extra = [c for c in table.columns if c.startswith("pass")]
    headers = [*keys, "runs", *METRICS, *extra]
    rows = []
    for r in table.iter_rows(named=True):
        row: list[object] = [r[k] or "–" for k in keys] + [r["runs"]]
        for m in METRICS:
            if r[f"{m}_n"] == 0:
                row.append("–")
            elif with_ci:
                cell = f"{fmt(r[m])} [{fmt(r[m + '_lo'])}, {fmt(r[m + '_hi'])}]"
                row.append(f"{cell} (n={r[m + '_n']})" if with_n else cell)
            else:
                row.append(r[m])
        row += [r[e] for e in extra]
        rows.append(row)
    return headers, rows


def write_report(table: pl.DataFrame, by: str, out_dir: Path) -> list[Path]:
    """Write report.md, report.csv (numbers, CIs and denominators as columns) and report.tex."""
    out_dir.mkdir(parents=True, exist_ok=True)
    headers, rows = _rows(table, by, with_ci=True)
    md = out_dir / f"report_by_{by}.md"
    md.write_text(to_markdown(headers, rows))
    tex = out_dir / f"report_by_{by}.tex"
    tex.write_text(to_paper_latex(table, by))
    csv = out_dir / f"report_by_{by}.csv"
    csv.write_text(to_csv(table.columns, table.rows()))
    return [md, csv, tex]


def _abbrev(value: float) -> str:
    """'0.20' -> '.20', as papers print bounded scores."""
    text = fmt(value)
    return text[1:] if text.startswith("0.") else text


def _paper_cell(r: dict, metric: str) -> str:
    if not r.get(f"{metric}_n"):
        return "--"
    mean = fmt(r[metric])
    low, high = r[f"{metric}_lo"], r[f"{metric}_hi"]
    if low is None or high is None or low != low or high != high:
        return mean
    ci = f"[{_abbrev(low)}, {_abbrev(high)}]"
    return rf"\begin{{tabular}}[t]{{@{{}}r@{{}}}}{mean}\\[-1pt]{{\scriptsize {ci}}}\end{{tabular}}"


_FAMILIES = {"phases": ("phase scores (M monitor, D design, I implementation, E execution, C conclusion)", PHASES),
             "conjunctive": ("conjunctive scores (a run passes when it passes every phase named)",
                             tuple(CONJUNCTIVE))}


def to_paper_latex(table: pl.DataFrame, by: str) -> str:
    """One table float per family of scores, each fitting \\textwidth: the group (wrapping), runs, then the
    family's metrics as mean over its 95% CI; `--` where no run was scored."""
    keys = GROUPINGS[by]
    families = dict(_FAMILIES)
    extra = tuple(c for c in table.columns if c.startswith("pass"))
    if extra:
        families["pass"] = ("pass@k and pass^k over attempts, on M·C·D·I·E", extra)
    name = " / ".join(keys)
    out = []
    for family, (what, metrics) in families.items():
        header = [latex_cell(name), "runs", *(latex_cell(m) for m in metrics)]
        body = []
        for r in table.iter_rows(named=True):
            group = " / ".join(str(r[k]) for k in keys if r[k]) or "--"
            cells = [latex_cell(group), str(r["runs"])]
            if family == "pass":
                cells += ["--" if r[m] is None else fmt(r[m]) for m in metrics]
            else:
                cells += [_paper_cell(r, m) for m in metrics]
            body.append(" & ".join(cells) + r" \\[2pt]")
        ci = "" if family == "pass" else " Mean over runs and 95\\% bootstrap CI (tasks resampled)."
        caption = latex_cell(f"{what[0].upper()}{what[1:]} by {by}.") + ci + " Denominators are in the CSV."
        spec = r"@{}>{\raggedright\arraybackslash}X" + "r" * (1 + len(metrics)) + "@{}"
        out.append(paper_table(spec, header, body, caption=caption, label=f"tab:failatlas-scores-{by}-{family}",
                               comment="FailAtlas `bench report`." if not out else ""))
    return "\n".join(out)


def render_terminal(table: pl.DataFrame, by: str) -> tuple[list[str], list[list[object]]]:
    return _rows(table, by, with_ci=False)
