"""What a trainer's multi-turn rollout was, in the kit's terms: the turn to grade and the tool use that counts.

The kit grades an episode on its final assistant turn (never a tool result), as ``truncated`` when that turn
was cut by the token budget or still asked for a tool the budget would not answer, and, under the tool-rl
preset, as ``unsafe`` when a tool query was refused as unsafe (the episode ends there, with the invalid calls
made until then). A trainer hands its reward something else: verl the decoded transcript with every tool
output in it, TRL a list of messages and the token ids. The functions here turn either into the same facts,
and ``grade_fields`` into the fields of one grade item, so the service grades it as the kit's episode.

Per-call verdicts come from the kit's tool (``T2sSqlTool``'s step rewards in verl's ``tool_rewards``, its
``calc_reward`` in verl's SGLang path, ``T2sSqlEnv.calls`` in TRL) and, for calls the trainer refused before
the tool saw them, from the trainer's own error text.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Optional

# the kit's episode loop (lib/episode/tools.ts hasSolution): a <solution> block commits, whatever else the turn holds
_SOLUTION = re.compile(r"<solution>[\s\S]*</solution>", re.IGNORECASE)
_TOOL_RESPONSE = re.compile(r"<tool_response>\n?([\s\S]*?)\n?</tool_response>")
_TOOL_CALL = re.compile(r"<tool_call>([\s\S]*?)</tool_call>")
# verl's _call_tool answers a call it could not run (bad arguments, unknown tool) with this text
VERL_TOOL_ERROR = "Error when executing tool:"

# step rewards of T2sSqlTool.execute: the call's verdict, read back by the reward (verl passes them as
# extra_info["tool_rewards"]); unsafe calls are invalid calls too
STEP_VALID = 0.0
STEP_INVALID = -0.05
STEP_UNSAFE = -1.05


@dataclass
class CallVerdict:
    """One tool call as the kit's episode counts it; `turn` is the assistant turn that made it."""
    invalid: bool = False
    unsafe_query: Optional[str] = None
    turn: int = 0


@dataclass
class EpisodeFacts:
    final: str
    cut: bool = False
    calls: list = field(default_factory=list)

    def grade_fields(self, preset: str) -> dict:
        """The grade item's reply fields: pred, finish_reason, invalid_tool_calls, unsafe_tool_query."""
        item: dict = {"pred": self.final}
        unsafe = next((c for c in self.calls if c.unsafe_query is not None), None)
        # tool-rl ends the kit's episode after the turn of the first unsafe query, whose calls are all
        # answered and counted (benchmark and train: endOnUnsafeTool)
        if preset == "tool-rl" and unsafe is not None:
            item["unsafe_tool_query"] = unsafe.unsafe_query
            item["invalid_tool_calls"] = sum(1 for c in self.calls if c.invalid and c.turn <= unsafe.turn)
            return item
        invalid = sum(1 for c in self.calls if c.invalid)
        if self.cut:
            item["finish_reason"] = "length"
        item["invalid_tool_calls"] = invalid
        return item


def verdict_of_step(step: float, query: Optional[str], turn: int = 0) -> CallVerdict:
    if step <= STEP_UNSAFE + 1e-9:
        return CallVerdict(True, query or "(an unsafe tool query)", turn)
    return CallVerdict(step <= STEP_INVALID + 1e-9, None, turn)


def verdict_of_text(text: str, query: Optional[str], turn: int = 0) -> CallVerdict:
    """A call's verdict from the tool turn's text alone (the kit writes `error: ` for an unusable call and
    `error (unsafe): ` for a refused query)."""
    if text.startswith("error (unsafe)"):
        return CallVerdict(True, query or "(an unsafe tool query)", turn)
    return CallVerdict(text.startswith("error: ") or text.startswith(VERL_TOOL_ERROR), None, turn)


def _pending_call(final: str, has_calls: bool) -> bool:
    """The turn still asks for a tool (and commits nothing): the kit's episode would have answered it, so
    ending here is the tool budget's truncation."""
    return has_calls and not _SOLUTION.search(final)


def _unclosed(final: str) -> bool:
    """A reply visibly cut mid-answer: an opened <solution>, <tool_call> or code fence never closed."""
    low = final.lower()
    if low.count("<solution>") > low.count("</solution>"):
        return True
    if final.count("<tool_call>") > final.count("</tool_call>"):
        return True
    return final.count("```") % 2 == 1


def _query_of_call(block: str) -> Optional[str]:
    try:
        args = json.loads(block).get("arguments")
        if isinstance(args, str):
            args = json.loads(args)
        q = args.get("query") if isinstance(args, dict) else None
        return q if isinstance(q, str) else None
    except (ValueError, AttributeError):
        return None


def verl_episode(solution_str: str, extra_info: Optional[dict] = None, tool_name: str = "execute_sql_query") -> EpisodeFacts:
    """The facts of a verl rollout from its decoded response (hermes tool format, e.g. Qwen's template).

    The final turn is the text after the last ``</tool_response>`` (less the role header the decoded template
    leaves). Per-call verdicts: ``extra_info["tool_rewards"]`` (verl >= 0.6's agent loop, one per tool turn),
    else ``extra_info["rollout_reward_scores"][tool_name]`` (the SGLang path: ``T2sSqlTool.calc_reward``),
    else the tool texts. ``extra_info["finish_reason"] == "length"`` or ``extra_info["truncated"]`` mark a cut
    reply; without them (verl hands its reward no finish reason) a reply is taken as cut when it leaves a
    <solution>, <tool_call> or fence open. In tool style (tool turns present, or ``extra_info["episode_style"]``
    "tool" from ``t2s tasks export --style tool``) a final turn still asking for a tool is truncated too.
    """
    info = extra_info or {}
    text = solution_str or ""
    responses = list(_TOOL_RESPONSE.finditer(text))
    final = text[responses[-1].end():] if responses else text
    final = re.sub(r"^\s*assistant[ \t]*\n", "", final, count=1) if responses else final
    head = text[:responses[-1].start()] if responses else ""
    queries = [_query_of_call(b) for b in _TOOL_CALL.findall(head)]
    contents = [m.group(1) for m in responses]
    steps = info.get("tool_rewards")
    steps = list(steps) if steps is not None and len(steps) == len(contents) else None
    calls, turn = [], 0
    for i, content in enumerate(contents):
        # blocks of one tool turn are separated by a newline only; an assistant turn lies between turns
        if i > 0 and text[responses[i - 1].end():responses[i].start()].strip():
            turn += 1
        query = queries[i] if i < len(queries) else None
        if content.startswith(VERL_TOOL_ERROR) or steps is None:
            calls.append(verdict_of_text(content, query, turn))
        else:
            calls.append(verdict_of_step(float(steps[i]), query, turn))
    scores = info.get("rollout_reward_scores")
    if steps is None and isinstance(scores, dict) and isinstance(scores.get(tool_name), (int, float)):
        calls = calls_of_state(float(scores[tool_name]))
    tool_style = bool(responses) or info.get("episode_style") == "tool"
    cut = info.get("finish_reason") == "length" or bool(info.get("truncated")) or _unclosed(final)
    cut = cut or (tool_style and _pending_call(final, bool(_TOOL_CALL.search(final))))
    return EpisodeFacts(final, cut, calls)


def state_of_calls(calls: Iterable[CallVerdict]) -> float:
    """One float for a trajectory's tool use (verl's calc_reward returns one): minus the invalid calls made
    through the turn of the first unsafe query (all of them when none), and minus 1000 more when there was one."""
    calls = list(calls)
    unsafe = next((c for c in calls if c.unsafe_query is not None), None)
    invalid = sum(1 for c in calls if c.invalid and (unsafe is None or c.turn <= unsafe.turn))
    return -float(invalid + (1000 if unsafe is not None else 0))


def calls_of_state(state: float) -> list:
    """The verdicts `state_of_calls` encodes (the calls' order is not kept; their count and the unsafe end are)."""
    n = int(round(-state))
    unsafe = n >= 1000
    invalid = n - 1000 if unsafe else n
    calls = [CallVerdict(True) for _ in range(invalid)]
    if unsafe and calls:
        calls[-1] = CallVerdict(True, "(an unsafe tool query)")
    elif unsafe:
        calls.append(CallVerdict(True, "(an unsafe tool query)"))
    return calls


def _content(message: dict) -> str:
    content = message.get("content") or ""
    if isinstance(content, list):  # content parts
        content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return content


def trl_episode(completion: Any, completion_ids: Optional[list] = None, stop_ids: Iterable[int] = (),
                environment: Any = None) -> EpisodeFacts:
    """The facts of a TRL completion: a string or a list of messages (TRL's tool loop: assistant turns with
    ``tool_calls``, tool turns), cut when its last token id is not an EOS or pad id (TRL's own test,
    GRPOTrainer ``mask_truncated_completions``). Per-call verdicts come from the environment's ``calls``
    (a ``T2sSqlEnv``) in turn order; a tool turn TRL itself answered with an error counts invalid."""
    stops = set(stop_ids)
    cut = bool(completion_ids) and completion_ids[-1] not in stops
    if isinstance(completion, str):
        return EpisodeFacts(completion, cut, [])
    if isinstance(completion, dict):
        completion = [completion]
    messages = [m for m in (completion or []) if isinstance(m, dict)]
    assistants = [m for m in messages if m.get("role", "assistant") == "assistant"]
    last = assistants[-1] if assistants else {}
    final = _content(last)
    env_calls = list(getattr(environment, "calls", []) or [])
    calls, turn = [], -1
    for m in messages:
        if m.get("role", "assistant") == "assistant":
            turn += 1
        if m.get("role") != "tool":
            continue
        text = _content(m)
        # TRL writes str({"error": ...}) for a call it could not make (unknown tool, bad arguments, exception)
        if text.startswith("{'error':"):
            calls.append(CallVerdict(True, None, turn))
        elif env_calls:
            c = env_calls.pop(0)
            calls.append(CallVerdict(c.invalid, c.unsafe_query, turn))
        else:
            calls.append(verdict_of_text(text, None, turn))
    cut = cut or _pending_call(final, bool(last.get("tool_calls")))
    return EpisodeFacts(final, cut, calls)
