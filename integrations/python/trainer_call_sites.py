"""The trainers' own call code, reproduced step for step for the tests (verl, TRL and torch cannot be
installed here). Each function names the file and commit it follows; keep them in step with those files.

verl: volcengine/verl, tags v0.5.0, v0.6.0, v0.7.0 and HEAD b178a3cd56f5 (2026-01-29).
TRL: huggingface/trl f2cd57710ae3 (2026-07-24), trl/trainer/grpo_trainer.py.
"""

from __future__ import annotations

import asyncio
import inspect
import json
from typing import Any

import t2s_env


async def verl_head_call_tool(tools: dict, name: str, arguments: str, tools_kwargs: dict, agent_data: Any,
                              max_tool_response_length: int = 100000) -> tuple:
    """verl HEAD (and v0.7.0) experimental/agent_loop/tool_agent_loop.py ToolAgentLoop._call_tool; v0.6.0 is
    the same without the agent_data argument."""
    tool, instance_id = None, None
    try:
        tool_args = json.loads(arguments)
        tool = tools[name]
        kwargs = tools_kwargs.get(name, {})
        instance_id, _ = await tool.create(create_kwargs=kwargs.get("create_kwargs", {}))
        tool_execution_response, tool_reward, res = await tool.execute(instance_id, tool_args, agent_data=agent_data)
    except Exception as e:  # noqa: BLE001 (as verl does)
        return t2s_env.ToolResponseLookAlike(text=f"Error when executing tool: {e}"), 0.0, {}
    finally:
        if tool and instance_id:
            await tool.release(instance_id)
    text = tool_execution_response.text
    if text and len(text) > max_tool_response_length:
        half = max_tool_response_length // 2
        text = text[:half] + "...(truncated)..." + text[-half:]
    kwargs = {"text": text}
    for attr in ["image", "video"]:
        if hasattr(tool_execution_response, attr) and getattr(tool_execution_response, attr) is not None:
            kwargs[attr] = getattr(tool_execution_response, attr)
    return t2s_env.ToolResponseLookAlike(**kwargs), tool_reward, res


async def verl_v050_call_tool(tools: dict, name: str, arguments: str, max_tool_response_length: int = 100000) -> Any:
    """verl v0.5.0 experimental/agent_loop/tool_agent_loop.py ToolAgentLoop._call_tool."""
    tool, instance_id = None, None
    try:
        tool_args = json.loads(arguments)
        tool = tools[name]
        instance_id = await tool.create()
        tool_response, _, _ = await tool.execute(instance_id, tool_args)
    except Exception as e:  # noqa: BLE001
        return e
    finally:
        if tool and instance_id:
            await tool.release(instance_id)
    if len(tool_response) > max_tool_response_length:
        half = max_tool_response_length // 2
        tool_response = tool_response[:half] + "...(truncated)..." + tool_response[-half:]
    return {"role": "tool", "content": tool_response}


async def verl_sglang_v060_trajectory(tool: Any, request_id: str, create_kwargs: dict, calls: list) -> tuple:
    """verl v0.6.0 workers/rollout/sglang_rollout/sglang_rollout.py: _handle_pending_state creates the
    instance once per trajectory and adds the creation responses; each TOOL_CALLING step executes with the
    arguments' JSON text; the end calls calc_reward and release. Returns (tool texts, calc_reward)."""
    results = await asyncio.gather(*[tool.create(request_id, **create_kwargs)])
    creation = [tool_result for _, tool_result in results]
    texts = [] if all(c.is_empty() for c in creation) else [c.text for c in creation]
    for arguments in calls:
        answered = await asyncio.gather(*[tool.execute(request_id, arguments)])
        for resp, _, _ in answered:
            assert resp.is_text_only() or resp.is_empty()
            texts.append(resp.text)
    reward = await tool.calc_reward(request_id)
    await tool.release(request_id)
    return texts, reward


async def verl_sglang_v050_trajectory(tool: Any, request_id: str, create_kwargs: dict, calls: list) -> tuple:
    """verl v0.5.0 sglang_rollout.py: create's answer is not read; execute answers plain text."""
    await asyncio.gather(*[tool.create(request_id, **create_kwargs)])
    texts = []
    for arguments in calls:
        answered = await asyncio.gather(*[tool.execute(request_id, arguments)])
        texts += [resp for resp, _, _ in answered]
    reward = await tool.calc_reward(request_id)
    await tool.release(request_id)
    return texts, reward


def verl_decoded_transcript(turns: list, tool_texts: list) -> str:
    """What verl's reward gets as solution_str for a hermes-format (Qwen2.5) multi-turn rollout: the response
    ids decoded with skip_special_tokens=True. An assistant turn is its text with each call as a
    <tool_call> block; the tool turn, rendered by apply_chat_template(remove_system_prompt=True), decodes to
    "user\\n<tool_response>\\n...\\n</tool_response>\\nassistant\\n" (the <|im_start|>/<|im_end|> are special)."""
    out, k = "", 0
    for i, turn in enumerate(turns):
        text = turn["text"]
        for args in turn["calls"]:
            text += "<tool_call>\n" + json.dumps({"name": "execute_sql_query", "arguments": args}) + "\n</tool_call>"
        out += text
        if turn["calls"] and i < len(turns) - 1:
            blocks = []
            for _ in turn["calls"]:
                blocks.append("<tool_response>\n" + tool_texts[k] + "\n</tool_response>")
                k += 1
            out += "user\n" + "\n".join(blocks) + "\nassistant\n"
    return out


def trl_environment_tools(environment: Any) -> dict:
    """trl grpo_trainer.py _generate_and_score_completions: the tool dict of one rollout's environment."""
    methods = [member for member_name, member in inspect.getmembers(environment, predicate=inspect.ismethod)
               if member_name not in ("reset", "get_reward") and not member_name.startswith("_")]
    return {tool.__name__: tool for tool in methods}


def trl_check_environment(factory: Any) -> list:
    """trl grpo_trainer.py GRPOTrainer.__init__: probe one instance; `reset` required; the other public methods are tools."""
    instance = factory()
    has_reset, methods = False, []
    for member_name, member in inspect.getmembers(instance, predicate=inspect.ismethod):
        if member_name == "reset":
            has_reset = True
        elif member_name == "get_reward":
            pass
        elif not member_name.startswith("_"):
            methods.append(member)
    if not has_reset:
        raise ValueError("Each environment instance returned by `environment_factory` must define a callable `reset`.")
    return methods


def trl_tool_loop(environment: Any, turns: list) -> list:
    """trl grpo_trainer.py _tool_call_loop for one rollout: each assistant turn with tool_calls is answered
    (sync_tool_dict[name](**arguments), an exception or unknown tool becoming str({"error": ...})) until the
    turns run out; the last turn's calls are left unanswered (max_tool_calling_iterations reached)."""
    tools = trl_environment_tools(environment)
    completion = []
    for i, turn in enumerate(turns):
        message = {"role": "assistant", "content": turn["text"]}
        if turn["calls"]:
            message["tool_calls"] = [{"type": "function", "function": {"name": "execute_sql_query", "arguments": a}} for a in turn["calls"]]
        completion.append(message)
        if not turn["calls"] or i == len(turns) - 1:
            continue
        for call in message["tool_calls"]:
            function = call["function"]
            name = function["name"]
            try:
                if name in tools:
                    result = tools[name](**function["arguments"])
                else:
                    raise ValueError(f"Tool {name} not found.")
            except Exception as e:  # noqa: BLE001
                result = {"error": str(e)}
            completion.append({"role": "tool", "name": name, "content": result if isinstance(result, list) else str(result)})
    return completion
