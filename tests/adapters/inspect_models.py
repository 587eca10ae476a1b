"""A model provider for real Inspect evals in tests: latency per call, scripted answers.

``scorio-latency/<name>`` waits ``latency_s`` per generation (so Inspect's
default concurrency has work to overlap) and answers ``yes`` or ``no`` by
the model's ``pattern``: the answer to the k-th call on a question is
``yes`` when ``pattern[k % len(pattern)]`` is ``"1"``.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

from inspect_ai.model import (
    ChatMessage,
    GenerateConfig,
    ModelAPI,
    ModelOutput,
    ModelUsage,
    modelapi,
)
from inspect_ai.tool import ToolChoice, ToolInfo

PROVIDER = "scorio-latency"


class LatencyModel(ModelAPI):
    """Answers ``yes``/``no`` after ``latency_s``; counts calls per question."""

    def __init__(
        self,
        model_name: str,
        base_url: str | None = None,
        api_key: str | None = None,
        config: GenerateConfig = GenerateConfig(),  # noqa: B008 (Inspect's signature)
        **model_args: Any,
    ) -> None:
        super().__init__(model_name, base_url, api_key, [], config)
        self.latency_s = float(model_args.get("latency_s", 0.02))
        self.pattern = str(model_args.get("pattern", "1"))
        self.calls: Counter[str] = Counter()

    async def generate(
        self,
        input: list[ChatMessage],
        tools: list[ToolInfo],
        tool_choice: ToolChoice,
        config: GenerateConfig,
    ) -> ModelOutput:
        question = input[-1].text
        turn = self.calls[question]
        self.calls[question] += 1
        await asyncio.sleep(self.latency_s)
        answer = "yes" if self.pattern[turn % len(self.pattern)] == "1" else "no"
        output = ModelOutput.from_content(model=self.model_name, content=answer)
        output.usage = ModelUsage(input_tokens=4, output_tokens=1, total_tokens=5)
        return output


modelapi(name=PROVIDER)(LatencyModel)
