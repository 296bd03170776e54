"""Agents: one protocol (`base.Agent`), a registry by name (`AGENTS`, a core `Registry`), and the built-in,
fault-injecting, hostile, LLM and external-CLI agents. Importing any agents module registers the built-in ones (this
file imports them); a new agent is a module that registers itself with `@register_agent("name")` plus one import
line here."""

from failatlas.bench_core.agents import (  # noqa: F401,E501
    builtin,
    external,
    faults,
    hostile,
    hostile_divert,
    hostile_starve,
    hostile_tests,
    method_mutant,
    mutant,
    react,
)
from failatlas.bench_core.agents.base import (
    AGENTS,
    Agent,
    AgentContext,
    Budget,
    agent_description,
    agent_names,
    create_agent,
    register_agent,
)

__all__ = ["AGENTS", "Agent", "AgentContext", "Budget", "agent_description", "agent_names", "create_agent",
           "register_agent"]
