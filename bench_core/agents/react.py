"""`react`: a tool-using agent over any OpenAI-compatible chat endpoint (role `agent`).

Tools run in the sandbox: `bash`, `write_file`, `read_file`, and `finish`. Budgets on steps, wall-clock time,
tokens and cost end the run early (the budget that stopped it is recorded). Every message, tool call and tool
result is a step of the run's trace, `read_file` included: a read runs as a traced `cat` in the sandbox, so it is
a sandbox command the monitor's rules and its LLM check see. Every LLM call, failed ones included, is an
`llm_call` step carrying its `llm_calls` row (role agent, model, tokens, cost); the runner's parent writes those
rows with the run's id (`runner.write_agent_llm_calls`). Runs in the runner's workers, which never write the
store: the client has no cache there. `model` (the runner passes the run's resolved model) overrides the role's.
"""

from __future__ import annotations

import json
import shlex

from failatlas.bench_core.agents.base import AgentContext, AgentOutcome, StepEvent, register_agent, task_prompt
from failatlas.core.errors import ConfigError

TOOLS = [
    {"type": "function", "function": {
        "name": "bash", "description": "Run a bash command in the repository root; returns exit code and output.",
        "parameters": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}},
    {"type": "function", "function": {
        "name": "write_file", "description": "Write a text file (path relative to the repository root).",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
                       "required": ["path", "content"]}}},
    {"type": "function", "function": {
        "name": "read_file", "description": "Read a text file (path relative to the repository root).",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}},
    {"type": "function", "function": {
        "name": "finish", "description": "Stop: the design, conclusion and run script are written.",
        "parameters": {"type": "object", "properties": {}}}},
]
SYSTEM = ("You are an AI research engineer working in a sandboxed Linux machine without network access. "
          "Use the tools to inspect the repository, implement what is missing, run the experiment and write the "
          "required outputs. Keep tool outputs short (pipe long output through tail).")
MAX_TOOL_OUTPUT = 6000


class ReactAgent:
    """A ReAct loop of an LLM (the `agent` role's endpoint) with shell and file tools: inspects the repository,
    implements what is missing, runs the experiment and writes the outputs."""

    name = "react"
    needs_reference = False
    llm_role = "agent"  # the runner resolves this role's model into the run's key

    def __init__(self, temperature: float | None = 0.0, model: str | None = None) -> None:
        from failatlas.core.llm import not_configured_reason, resolve_config

        config = resolve_config("agent")
        if config is None:
            raise ConfigError(f"the react agent needs an LLM endpoint: {not_configured_reason('agent')}")
        self.config = config.model_copy(update={"model": model}) if model else config
        self.temperature = temperature

    def _tool(self, ctx: AgentContext, name: str, args: dict) -> str:
        if name == "bash":
            r = ctx.sh(str(args.get("command", "")))
            out = f"exit code {r.returncode}{' (timed out)' if r.timed_out else ''}\n{r.stdout}{r.stderr}"
            return out[-MAX_TOOL_OUTPUT:]
        if name == "write_file":
            path = str(args.get("path", "")).lstrip("/")
            ctx.write(path, str(args.get("content", "")))
            return f"wrote {path}"
        if name == "read_file":
            path = str(args.get("path", "")).lstrip("/")
            ctx.record(StepEvent(kind="tool_call", tool="read_file", arguments={"path": path}))
            limit = max(min(ctx.budget.command_timeout_s, ctx.seconds_left()), 1.0)
            r = ctx.sandbox.exec(f"cat -- {shlex.quote(path)}", timeout=limit, cwd=ctx.workdir)
            out = r.stdout[-MAX_TOOL_OUTPUT:] if r.returncode == 0 else f"error: {r.stderr.strip()[-500:]}"
            ctx.record(StepEvent(kind="tool_result", tool="read_file", content=out[-2000:]))
            return out
        return f"error: unknown tool {name}"

    def _chat(self, client, records, ctx: AgentContext, messages: list[dict]):  # noqa: ANN001, ANN202
        """One LLM call; its `llm_calls` row travels in the trace, whether the call succeeded or failed."""
        try:
            return client.chat(messages, tools=TOOLS, temperature=self.temperature, purpose="agent")
        finally:
            for row in records.calls:
                call = {k: (v.isoformat() if hasattr(v, "isoformat") else v) for k, v in row.items()}
                ctx.record(StepEvent(kind="llm_call", content=None if call["status"] == "ok" else call["error"],
                                     arguments={"llm_call": call}))
            records.calls.clear()

    def run(self, ctx: AgentContext) -> AgentOutcome:
        from failatlas.core.llm import LLMClient, MemoryRecords

        records = MemoryRecords()
        client = LLMClient(self.config, records=records, use_cache=False, check_endpoint=True)
        ctx.sh("mkdir -p .failatlas")
        messages = [{"role": "system", "content": SYSTEM},
                    {"role": "user", "content": task_prompt(ctx.view, ctx.workdir)}]
        for m in messages:
            ctx.record(StepEvent(kind="message", role=m["role"], content=m["content"]))
        tokens, cost, stopped = 0, 0.0, None
        for _step in range(ctx.budget.max_steps):
            if ctx.seconds_left() <= 0:
                stopped = "time"
                break
            reply = self._chat(client, records, ctx, messages)
            tokens += (reply.prompt_tokens or 0) + (reply.completion_tokens or 0)
            cost += reply.cost_usd or 0.0
            ctx.record(StepEvent(kind="message", role="assistant", content=reply.content, arguments={
                "prompt_tokens": reply.prompt_tokens, "completion_tokens": reply.completion_tokens,
                "cost_usd": reply.cost_usd, "latency_s": reply.latency_s, "model": reply.model}))
            assistant = {"role": "assistant", "content": reply.content or ""}
            if reply.tool_calls:
                assistant["tool_calls"] = [{"id": t.id, "type": "function",
                                            "function": {"name": t.name, "arguments": t.arguments}}
                                           for t in reply.tool_calls]
            messages.append(assistant)
            if tokens > ctx.budget.max_tokens:
                stopped = "tokens"
                break
            if cost > ctx.budget.max_cost_usd:
                stopped = "cost"
                break
            if not reply.tool_calls:
                messages.append({"role": "user", "content": "Continue with a tool call, or call finish."})
                continue
            finished = False
            for call in reply.tool_calls:
                try:
                    args = json.loads(call.arguments or "{}")
                except json.JSONDecodeError:
                    args = {}
                if call.name == "finish":
                    finished = True
                    result = "finished"
                else:
                    result = self._tool(ctx, call.name, args if isinstance(args, dict) else {})
                messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
            if finished:
                break
        else:
            stopped = "steps"
        client.close()
        return AgentOutcome(stopped_by=stopped, tokens=tokens, cost_usd=cost)


register_agent("react")(ReactAgent)
