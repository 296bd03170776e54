"""`react`: a tool-using agent over any OpenAI-compatible chat endpoint (role `agent`).

Tools run in the sandbox: `bash`, `write_file`, `read_file`, and `finish`. Budgets on steps, wall-clock time,
tokens and cost end the run early (the budget that stopped it is recorded). Every message, tool call and tool
result is a step of the run's trace; every LLM call is a step with its tokens, cost and latency.
Runs in the runner's workers, which never write the store: the client has no cache there.
"""

from __future__ import annotations

import json

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
    name = "react"
    needs_reference = False

    def __init__(self, temperature: float = 0.0) -> None:
        from failatlas.core.llm import not_configured_reason, resolve_config

        self.config = resolve_config("agent")
        if self.config is None:
            raise ConfigError(f"the react agent needs an LLM endpoint: {not_configured_reason('agent')}")
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
            try:
                return ctx.sandbox.read_file(f"{ctx.workdir}/{path}").decode(errors="replace")[-MAX_TOOL_OUTPUT:]
            except (FileNotFoundError, LookupError, PermissionError) as exc:  # missing; a folder, FIFO or link
                return f"error: {exc}"
        return f"error: unknown tool {name}"

    def run(self, ctx: AgentContext) -> AgentOutcome:
        from failatlas.core.llm import LLMClient

        client = LLMClient(self.config, None, use_cache=False)
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
            reply = client.chat(messages, tools=TOOLS, temperature=self.temperature, purpose="agent")
            tokens += (reply.prompt_tokens or 0) + (reply.completion_tokens or 0)
            cost += reply.cost_usd or 0.0
            ctx.record(StepEvent(kind="llm_call", content=reply.content, arguments={
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
