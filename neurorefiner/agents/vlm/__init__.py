"""The roles through any OpenAI-compatible vision-language model server (e.g. ``vllm serve``)."""

from neurorefiner.agents.vlm.client import AgentServerError, ChatClient
from neurorefiner.agents.vlm.roles import VLMAdvisor, VLMInspector, VLMValidator

__all__ = ["AgentServerError", "ChatClient", "VLMAdvisor", "VLMInspector", "VLMValidator"]
