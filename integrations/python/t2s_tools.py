"""The kit's read-only SQL tool for trainers' tool loops: verl (``T2sSqlTool``) and TRL (``T2sSqlEnv``).

Both answer a call with exactly the text the kit's episode puts in its tool turn (``POST /v1/tool``), and
record each call's verdict (invalid, unsafe) the way the kit's episode counts it, for the reward to read.

verl's call sites, checked against volcengine/verl (files at v0.5.0, v0.6.0, v0.7.0 and b178a3cd):
* experimental/agent_loop/tool_agent_loop.py ``_call_tool``, v0.6.0 and later: ``instance_id, _ = await
  tool.create(create_kwargs=...)``, ``resp, reward, metrics = await tool.execute(instance_id, args, ...)``,
  ``resp.text`` (and ``.image``/``.video``), ``release(instance_id)``: one instance per call.
* the same loop in v0.5.0: ``instance_id = await tool.create()`` (no arguments), ``text, _, _ = await
  tool.execute(instance_id, args)`` with ``text`` a str.
* workers/rollout/sglang_rollout/sglang_rollout.py: ``create(request_id, **create_kwargs)`` once per
  trajectory, ``execute(request_id, arguments_json_text, **execute_kwargs)``, ``calc_reward``, ``release``.
When verl is importable its own ``BaseTool`` and ``ToolResponse`` are used (and a verl without
``ToolResponse``, v0.5, gets v0.5's plain returns); without verl, stdlib look-alikes keep this module
importable and give the >= 0.6 shapes.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any, Optional

from t2s_client import SQL_TOOL_NAME, T2sEnvClient, T2sEnvError
from t2s_episode import STEP_INVALID, STEP_UNSAFE, STEP_VALID, CallVerdict, state_of_calls

try:  # verl present: its own types, so isinstance checks and pydantic schemas work
    from verl.tools.base_tool import BaseTool as _ToolBase  # type: ignore
except Exception:  # noqa: BLE001 (any import failure means: no usable verl)
    _ToolBase = object
try:
    from verl.tools.schemas import ToolResponse  # type: ignore
    VERL_API = "0.6"
except Exception:  # noqa: BLE001
    ToolResponse = None
    VERL_API = "0.5" if _ToolBase is not object else "0.6"

SQL_TOOL_DESCRIPTION = "Run one read-only SQLite query (SELECT or WITH) against the database and see its first rows or its error."
QUERY_DESCRIPTION = "The SQLite query to run."


class ToolResponseLookAlike:
    """verl.tools.schemas.ToolResponse's fields and tests, for when verl is not installed."""

    def __init__(self, text: Optional[str] = None, image: Optional[list] = None, video: Optional[list] = None):
        self.text, self.image, self.video = text, image, video

    def is_empty(self) -> bool:
        return not self.text and not self.image and not self.video

    def is_text_only(self) -> bool:
        return bool(self.text) and not self.image and not self.video

    def __repr__(self) -> str:
        return f"ToolResponse(text={self.text!r})"


def sql_tool_schema() -> dict:
    """The kit's own OpenAI function definition of the tool (lib/episode/tools.ts sqlToolSpec)."""
    return {
        "type": "function",
        "function": {
            "name": SQL_TOOL_NAME,
            "description": SQL_TOOL_DESCRIPTION,
            "parameters": {"type": "object", "properties": {"query": {"type": "string", "description": QUERY_DESCRIPTION}}, "required": ["query"]},
        },
    }


def _schema_name(tool_schema: Any) -> str:
    if tool_schema is None:
        return SQL_TOOL_NAME
    if isinstance(tool_schema, dict):
        return tool_schema.get("function", {}).get("name", SQL_TOOL_NAME)
    return getattr(getattr(tool_schema, "function", None), "name", SQL_TOOL_NAME)


def _target(args: dict) -> Optional[dict]:
    if args.get("task_id"):
        return {"task_id": args["task_id"]}
    if args.get("db_path") or args.get("db"):
        return {"db": args.get("db_path") or args.get("db")}
    return None


def _verdict(answer: dict, turn: int) -> CallVerdict:
    return CallVerdict(bool(answer.get("invalid")), answer.get("unsafe"), turn)


class T2sSqlTool(_ToolBase):
    """The SQL tool for verl's agent loops (a verl ``BaseTool`` when verl is installed).

    ``config``: ``url``, ``api_key``, ``timeout``; ``db_path`` or ``task_id`` for an instance created without
    the row's kwargs (v0.5's agent loop passes none); ``verl_api`` ("0.5" or "0.6") to force the return shapes.
    Each instance is created with the row's ``task_id`` or ``db_path``
    (``extra_info.tools_kwargs.execute_sql_query.create_kwargs``, written by ``t2s tasks export --to verl
    --style tool``). ``execute``'s step reward is the call's verdict (0.0 valid, -0.05 invalid, -1.05 unsafe),
    which verl hands the reward as ``extra_info["tool_rewards"]``; ``calc_reward`` gives the trajectory's
    state as one float (t2s_episode.state_of_calls) for the SGLang path.
    """

    def __init__(self, config: Optional[dict] = None, tool_schema: Any = None):
        self.config = dict(config or {})
        self.client = T2sEnvClient(self.config.get("url"), timeout=float(self.config.get("timeout", 120.0)), api_key=self.config.get("api_key"))
        if _ToolBase is not object and (tool_schema is None or isinstance(tool_schema, dict)):
            # verl's loops read tool.tool_schema.model_dump(): its pydantic schema, not a dict
            from verl.tools.schemas import OpenAIFunctionToolSchema  # type: ignore
            tool_schema = OpenAIFunctionToolSchema.model_validate(tool_schema or sql_tool_schema())
        self.tool_schema = tool_schema
        self.name = _schema_name(tool_schema)
        self.api = str(self.config.get("verl_api", VERL_API))
        self._instances: dict = {}

    def get_openai_tool_schema(self) -> Any:
        return self.tool_schema if self.tool_schema is not None else sql_tool_schema()

    def _response(self, text: Optional[str] = None) -> Any:
        if self.api == "0.5":
            return text if text is not None else ""
        return (ToolResponse or ToolResponseLookAlike)(text=text)

    async def create(self, instance_id: Optional[str] = None, create_kwargs: Optional[dict] = None, **kwargs: Any) -> Any:
        """Returns ``(instance_id, ToolResponse())`` (verl >= 0.6), or the id alone (v0.5)."""
        target = _target({**(create_kwargs or {}), **kwargs}) or _target(self.config)
        if target is None:
            raise T2sEnvError("T2sSqlTool.create needs task_id or db_path (tools_kwargs.<tool>.create_kwargs, or db_path in the tool config)")
        instance_id = instance_id or str(uuid.uuid4())
        self._instances[instance_id] = {"target": target, "calls": []}
        return instance_id if self.api == "0.5" else (instance_id, self._response())

    def _execute_sync(self, instance_id: str, parameters: Any) -> tuple:
        state = self._instances.get(instance_id)
        if state is None:
            raise T2sEnvError(f"no tool instance {instance_id}; call create() first")
        # a JSON string is passed on as written, so a malformed call gets the episode's own error text
        answer = self.client.tool(state["target"], name=self.name, arguments=parameters if parameters is not None else {})
        # verl runs one turn's calls concurrently, so the tool cannot tell turns apart: each call is its own
        verdict = _verdict(answer, len(state["calls"]))
        state["calls"].append(verdict)
        step = STEP_UNSAFE if verdict.unsafe_query is not None else STEP_INVALID if verdict.invalid else STEP_VALID
        metrics = {"invalid": verdict.invalid, "unsafe": verdict.unsafe_query is not None, "calls": len(state["calls"])}
        return self._response(answer["content"]), step, metrics

    async def execute(self, instance_id: str, parameters: Any, **kwargs: Any) -> tuple:
        """Returns ``(ToolResponse(text), step_reward, metrics)``; v0.5: ``(text, step_reward, metrics)``."""
        return await asyncio.get_running_loop().run_in_executor(None, self._execute_sync, instance_id, parameters)

    async def calc_reward(self, instance_id: str, **kwargs: Any) -> float:
        return state_of_calls(self._instances.get(instance_id, {}).get("calls", []))

    def invalid_calls(self, instance_id: str) -> int:
        """Invalid calls of an instance so far."""
        return sum(1 for c in self._instances.get(instance_id, {}).get("calls", []) if c.invalid)

    async def release(self, instance_id: str, **kwargs: Any) -> None:
        self._instances.pop(instance_id, None)


class T2sSqlEnv:
    """The SQL tool as a TRL ``environment_factory`` environment (trl GRPOTrainer, f2cd5771).

    TRL builds one per rollout (``environment_factory()``, so configure it with $T2S_ENV_URL or
    ``functools.partial(T2sSqlEnv, url=...)``), calls ``reset(**row)`` with the dataset row (``task_id`` or
    ``db_path``), and exposes every public method but ``reset`` as a tool: here only ``execute_sql_query``,
    whose answer is the kit's tool-turn text. ``calls`` holds each call's verdict for ``trl_reward``, which
    TRL hands the instances as ``environments``.
    """

    def __init__(self, url: Optional[str] = None, client: Optional[T2sEnvClient] = None, api_key: Optional[str] = None):
        self._client = client or T2sEnvClient(url, api_key=api_key)
        self._target: Optional[dict] = None
        self.calls: list = []

    def reset(self, **row: Any) -> None:
        self._target = _target(row)
        if self._target is None:
            raise T2sEnvError("T2sSqlEnv.reset needs the row's task_id or db_path (export with `t2s tasks export --to trl`)")
        self.calls = []
        return None

    def execute_sql_query(self, query: str) -> str:
        """Run one read-only SQLite query (SELECT or WITH) against the database and see its first rows or its error.

        Args:
            query: The SQLite query to run.
        """
        if self._target is None:
            raise T2sEnvError("T2sSqlEnv.execute_sql_query before reset(); TRL calls reset(**row) first")
        answer = self._client.tool(self._target, name=SQL_TOOL_NAME, arguments={"query": query})
        self.calls.append(_verdict(answer, len(self.calls)))
        return answer["content"]
