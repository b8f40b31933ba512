"""MR-Search: meta-reinforcement learning with self-reflection for LLM search agents, as a verl plugin."""

from __future__ import annotations

__version__ = "0.1.0"
