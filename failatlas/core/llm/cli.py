"""`failatlas llm`: the resolved configuration of every LLM role, and what the calls spent (thin: query, print)."""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.markup import escape
from rich.padding import Padding
from rich.table import Table

from failatlas.core.cli import compact_table, console, fit_columns, least_width, store

from .config import ROLES, resolve_config
from .usage import llm_spend

app = typer.Typer(no_args_is_help=True)


def resolved_roles() -> dict[str, dict | None]:
    """role -> its resolved settings (`LLMConfig.describe`: never the key), None when not configured."""
    out: dict[str, dict | None] = {}
    for role in ROLES:
        config = resolve_config(role)
        out[role] = config.describe() if config is not None else None
    return out


@app.command("config")
def config_command(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON for machines instead of a table.")] = False,
    check: Annotated[bool, typer.Option(help="Also send each configured endpoint one cheap request.")] = False,
) -> None:
    """Print each role's resolved endpoint, model and call parameters (the key's variable name, never the key)."""
    roles = resolved_roles()
    checks: dict[str, str] = {}
    if check:
        from . import LLMClient, LLMEndpointError

        for role, described in roles.items():
            if described is None:
                continue
            try:
                LLMClient(resolve_config(role)).check()  # type: ignore[arg-type]
                checks[role] = "ok"
            except LLMEndpointError as exc:
                checks[role] = exc.one_line()
    if as_json:
        console.print_json(json.dumps({"roles": roles, "checks": checks}, default=str))
        return
    headers = ("role", "endpoint", "model", "temperature", "max tokens", "key from", "structured", "check")
    rows = []
    for role, d in roles.items():
        if d is None:
            rows.append((role, "not configured", "", "", "", "", "", ""))
            continue
        temperature = "omitted" if d["temperature"] is None else str(d["temperature"])
        cap = "-" if d["max_tokens"] is None else f"{d['max_tokens']} ({d['max_tokens_param']})"
        rows.append((role, escape(d["endpoint"]), escape(d["model"]), temperature, cap,
                     escape(d["api_key_env"] or "(no key)"), d["structured_mode"], escape(checks.get(role, ""))))
    table = compact_table(*headers)
    for row in rows:
        table.add_row(*row)
    if least_width(table) <= console.width:
        console.print(fit_columns(table))
        return
    # too narrow for one row per role without breaking an endpoint or model name (at 80 columns a table cut
    # them with "…", issue 42): one block per role, a setting a line, long values wrapped at their spaces
    for row in rows:
        console.print(f"[bold]{row[0]}[/]" + (": not configured" if row[1] == "not configured" else ""),
                      highlight=False)
        if row[1] != "not configured":
            for name, value in zip(headers[1:], row[1:], strict=True):
                if value:
                    console.print(Padding(f"{name}: {value}", (0, 0, 0, 2)), highlight=False)


@app.command("spend")
def spend_command(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON for machines instead of a table.")] = False,
) -> None:
    """What LLM calls spent, per role and model (every role: agent, judge, monitor, extractor, labeller)."""
    rows = llm_spend(store(create=False))
    if as_json:
        console.print_json(json.dumps(rows, default=str))
        return
    table = Table("role", "model", "endpoint", "calls", "cached", "failed", "tokens in", "tokens out", "cost $")
    for r in rows:
        cost = f"{r['cost_usd']:.4f}" + (f" (+{r['unpriced']} unpriced)" if r["unpriced"] else "")
        table.add_row(r["role"], escape(r["model"]), escape(r["endpoint"]), str(r["calls"]), str(r["cached"]),
                      str(r["failed"]), str(r["prompt_tokens"]), str(r["completion_tokens"]), cost)
    console.print(table)
    if not rows:
        console.print("no LLM calls recorded yet")
