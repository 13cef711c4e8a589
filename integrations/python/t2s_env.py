"""Adapters from Python trainers to the t2s-lab environment service (`t2s env serve`).

Standard library only (urllib, json, concurrent.futures), so it drops into any trainer's environment:

* ``trl_reward(...)`` returns a TRL ``reward_funcs`` entry: ``f(prompts, completions, **kwargs) -> list[float]``,
  with the columns of ``t2s tasks export --to trl`` (``task_id``, ``db_path``, ``solution``) as kwargs.
* ``compute_score(data_source, solution_str, ground_truth, extra_info=None, **kw)`` is verl's custom reward
  function; ``compute_score_batch(data_sources, solution_strs, ground_truths, extra_infos, **kw)`` its
  batch reward manager form. Both read the columns of ``t2s tasks export --to verl``.
* ``T2sSqlTool`` is the kit's read-only SQL tool for verl-style multi-turn agent loops, duck-typed on
  verl's ``BaseTool`` (``get_openai_tool_schema``, ``create``, ``execute``, ``calc_reward``, ``release``).

Every reward is the one the kit's own grader gives (same extraction, comparison, preset and gold cache);
every tool answer is the text an episode of the kit shows. The service URL comes from the ``url``
argument or ``$T2S_ENV_URL`` (default ``http://127.0.0.1:8100``).
"""

from __future__ import annotations

import asyncio
import json
import os
import urllib.error
import urllib.request
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Iterable, Optional

DEFAULT_URL = "http://127.0.0.1:8100"
SQL_TOOL_NAME = "execute_sql_query"


class T2sEnvError(RuntimeError):
    """The service refused a request, or an item could not be graded (e.g. a gold query that fails)."""


def _url(url: Optional[str]) -> str:
    return (url or os.environ.get("T2S_ENV_URL") or DEFAULT_URL).rstrip("/")


class T2sEnvClient:
    """A small HTTP client of the service: batched grading spread over a few threads, the tool, prompts."""

    def __init__(self, url: Optional[str] = None, timeout: float = 120.0, batch_size: int = 64, max_workers: int = 8):
        self.url = _url(url)
        self.timeout = timeout
        self.batch_size = max(1, int(batch_size))
        self.max_workers = max(1, int(max_workers))

    def _call(self, path: str, body: Optional[dict] = None) -> Any:
        data = None if body is None else json.dumps(body).encode("utf-8")
        req = urllib.request.Request(self.url + path, data=data, method="GET" if body is None else "POST",
                                     headers={"content-type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as res:
                return json.loads(res.read().decode("utf-8"))
        except urllib.error.HTTPError as e:
            detail = e.read().decode("utf-8", "replace")
            try:
                detail = json.loads(detail)["error"]["message"]
            except (ValueError, KeyError, TypeError):
                pass
            raise T2sEnvError(f"{path} answered {e.code}: {detail}") from None
        except urllib.error.URLError as e:
            raise T2sEnvError(f"cannot reach the t2s env service at {self.url} ({e.reason}); start it with `t2s env serve`") from None

    def health(self) -> dict:
        return self._call("/health")

    def grade(self, items: list) -> list:
        """Grades items ({"task_id"} or {"db", "gold"}, plus "pred" and options); answers in the same order."""
        batches = [items[i:i + self.batch_size] for i in range(0, len(items), self.batch_size)]
        if len(batches) <= 1:
            return self._call("/v1/grade", {"items": items})["results"] if items else []
        with ThreadPoolExecutor(max_workers=min(self.max_workers, len(batches))) as pool:
            parts = list(pool.map(lambda b: self._call("/v1/grade", {"items": b})["results"], batches))
        return [r for part in parts for r in part]

    def tool(self, target: dict, name: str = SQL_TOOL_NAME, arguments: Any = None, query: Optional[str] = None) -> dict:
        """The tool turn's text for one call on a task's ({"task_id"}) or a file's ({"db"}) database."""
        body = dict(target)
        if query is not None:
            body["query"] = query
        else:
            body["name"] = name
            body["arguments"] = arguments if arguments is not None else {}
        return self._call("/v1/tool", body)

    def prompt(self, target: dict, style: Optional[str] = None, protocol: Optional[str] = None) -> dict:
        """The opening messages and tools of a task's episode, as the kit renders them."""
        body = dict(target)
        if style:
            body["style"] = style
        if protocol:
            body["protocol"] = protocol
        return self._call("/v1/prompt", body)


def completion_text(completion: Any) -> str:
    """The reply to grade: a plain string, or the last assistant message of a conversational completion."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, dict):
        return completion.get("content") or ""
    if isinstance(completion, (list, tuple)):
        for message in reversed(list(completion)):
            if isinstance(message, dict) and message.get("role", "assistant") == "assistant":
                content = message.get("content") or ""
                if isinstance(content, list):  # content parts
                    content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
                return content
        return ""
    raise TypeError(f"a completion must be a string or a list of messages, got {type(completion).__name__}")


def _target(task_id: Any, db: Any, gold: Any, use_task_id: bool) -> dict:
    if use_task_id and task_id:
        return {"task_id": task_id}
    if db and gold:
        return {"db": db, "gold": gold}
    if task_id:
        return {"task_id": task_id}
    raise T2sEnvError("each sample needs task_id, or db_path and the gold SQL (export with `t2s tasks export`)")


def _rewards(client: T2sEnvClient, items: list, on_error: str) -> list:
    out = []
    for answer in client.grade(items):
        if "error" in answer:
            if on_error == "raise":
                raise T2sEnvError(answer["error"])
            out.append(None)
        else:
            out.append(float(answer["reward"]))
    return out


def _column(kwargs: dict, name: str, n: int) -> list:
    v = kwargs.get(name)
    return list(v) if isinstance(v, (list, tuple)) else [v] * n


def trl_reward(url: Optional[str] = None, preset: str = "shaped", use_task_id: bool = False, on_error: str = "raise",
               client: Optional[T2sEnvClient] = None, **grade_options: Any):
    """Returns a TRL reward function graded by the kit: ``f(prompts, completions, **kwargs) -> list[float]``.

    kwargs are the dataset's other columns, one value per completion: ``db_path`` and ``solution`` (the gold
    SQL) are sent as {"db", "gold"}; with ``use_task_id`` (or when they are missing) ``task_id`` is sent and
    the service grades with that task's own database, gold and grading overrides. ``finish_reason`` (list),
    when TRL passes it, marks replies cut by the token budget. ``on_error="none"`` gives None instead of
    raising for an item the service cannot grade. ``grade_options`` (e.g. ``order="anywhere"``) go into
    every item.
    """
    c = client or T2sEnvClient(url)

    def t2s_reward(prompts=None, completions=None, **kwargs) -> list:
        completions = list(completions or [])
        n = len(completions)
        ids, dbs, golds = _column(kwargs, "task_id", n), _column(kwargs, "db_path", n), _column(kwargs, "solution", n)
        finish = _column(kwargs, "finish_reason", n)
        items = []
        for i, completion in enumerate(completions):
            item = {**_target(ids[i], dbs[i], golds[i], use_task_id), "pred": completion_text(completion), "preset": preset, **grade_options}
            if finish[i] in ("stop", "length", "tool_calls"):
                item["finish_reason"] = finish[i]
            items.append(item)
        return _rewards(c, items, on_error)

    t2s_reward.__name__ = f"t2s_{preset.replace('-', '_')}"
    return t2s_reward


_clients: dict = {}


def _shared_client(url: Optional[str]) -> T2sEnvClient:
    key = _url(url)
    if key not in _clients:
        _clients[key] = T2sEnvClient(key)
    return _clients[key]


def _verl_item(solution_str: str, ground_truth: Any, extra_info: Optional[dict], use_task_id: bool, preset: str, options: dict) -> dict:
    info = extra_info or {}
    gold = ground_truth.get("ground_truth") if isinstance(ground_truth, dict) else ground_truth
    return {**_target(info.get("task_id"), info.get("db_path"), gold, use_task_id), "pred": solution_str or "", "preset": preset, **options}


def compute_score(data_source: str, solution_str: str, ground_truth: Any, extra_info: Optional[dict] = None,
                  url: Optional[str] = None, preset: str = "shaped", use_task_id: bool = False, **options: Any) -> float:
    """verl's custom reward function: the kit's reward of one decoded response.

    ``ground_truth`` is the gold SQL (``reward_model.ground_truth`` of the verl export); ``extra_info`` holds
    ``db_path`` and ``task_id``. Extra keyword arguments (verl's ``custom_reward_function.reward_kwargs``)
    choose the service ``url``, the ``preset`` and comparison options.
    """
    del data_source  # every source of the export is graded the same way
    item = _verl_item(solution_str, ground_truth, extra_info, use_task_id, preset, options)
    return _rewards(_shared_client(url), [item], "raise")[0]


def compute_score_batch(data_sources: list, solution_strs: list, ground_truths: list, extra_infos: Optional[list] = None,
                        url: Optional[str] = None, preset: str = "shaped", use_task_id: bool = False, **options: Any) -> list:
    """verl's batch reward manager form: one HTTP batch for a whole rollout batch; returns list[float]."""
    infos = list(extra_infos) if extra_infos is not None else [None] * len(solution_strs)
    items = [_verl_item(s, g, e, use_task_id, preset, options) for s, g, e in zip(solution_strs, ground_truths, infos)]
    del data_sources
    return _rewards(_shared_client(url), items, "raise")


def _schema_name(tool_schema: Any) -> str:
    if tool_schema is None:
        return SQL_TOOL_NAME
    if isinstance(tool_schema, dict):
        return tool_schema.get("function", {}).get("name", SQL_TOOL_NAME)
    fn = getattr(tool_schema, "function", None)
    return getattr(fn, "name", SQL_TOOL_NAME)


class T2sSqlTool:
    """The kit's read-only SQL tool for verl-style agent loops (duck-typed on verl's BaseTool).

    ``config`` may hold ``url`` (the service). Each trajectory's instance is created with the sample's
    ``task_id`` or ``db_path`` (verl passes ``extra_info.tools_kwargs.execute_sql_query.create_kwargs``,
    which ``t2s tasks export --to verl`` writes). ``execute`` answers with exactly the text the kit's
    episode shows for that call; the step reward is 0.0 and ``metrics["invalid"]`` says whether the kit
    counts the call as invalid (the final reward comes from ``compute_score``).
    """

    def __init__(self, config: Optional[dict] = None, tool_schema: Any = None):
        self.config = dict(config or {})
        self.client = T2sEnvClient(self.config.get("url"), timeout=float(self.config.get("timeout", 120.0)))
        self.tool_schema = tool_schema
        self.name = _schema_name(tool_schema)
        self._instances: dict = {}

    def get_openai_tool_schema(self) -> Any:
        if self.tool_schema is not None:
            return self.tool_schema
        return {
            "type": "function",
            "function": {
                "name": SQL_TOOL_NAME,
                "description": "Run one read-only SQLite query (SELECT or WITH) against the database and see its first rows or its error.",
                "parameters": {"type": "object", "properties": {"query": {"type": "string", "description": "The SQLite query to run."}}, "required": ["query"]},
            },
        }

    async def create(self, instance_id: Optional[str] = None, create_kwargs: Optional[dict] = None, **kwargs: Any) -> str:
        args = {**(create_kwargs or {}), **kwargs}
        if args.get("task_id"):
            target = {"task_id": args["task_id"]}
        elif args.get("db_path") or args.get("db"):
            target = {"db": args.get("db_path") or args.get("db")}
        else:
            raise T2sEnvError("T2sSqlTool.create needs task_id or db_path (in tools_kwargs.<tool>.create_kwargs)")
        instance_id = instance_id or str(uuid.uuid4())
        self._instances[instance_id] = {"target": target, "calls": 0, "invalid": 0}
        return instance_id

    def _execute_sync(self, instance_id: str, parameters: Any) -> tuple:
        state = self._instances.get(instance_id)
        if state is None:
            raise T2sEnvError(f"no tool instance {instance_id}; call create() first")
        # a JSON string is passed on as written, so a malformed call gets the episode's own error text
        answer = self.client.tool(state["target"], name=self.name, arguments=parameters if parameters is not None else {})
        state["calls"] += 1
        state["invalid"] += 1 if answer["invalid"] else 0
        return answer["content"], 0.0, {"invalid": bool(answer["invalid"]), "calls": state["calls"]}

    async def execute(self, instance_id: str, parameters: Any, **kwargs: Any) -> tuple:
        return await asyncio.get_running_loop().run_in_executor(None, self._execute_sync, instance_id, parameters)

    async def calc_reward(self, instance_id: str, **kwargs: Any) -> float:
        return 0.0

    def invalid_calls(self, instance_id: str) -> int:
        """Invalid calls of a trajectory so far (pass as ``invalid_tool_calls`` to the tool-rl preset)."""
        return self._instances.get(instance_id, {}).get("invalid", 0)

    async def release(self, instance_id: str, **kwargs: Any) -> None:
        self._instances.pop(instance_id, None)


def iter_jsonl(path: str) -> Iterable[dict]:
    """The records of a jsonl file (an export's train.jsonl), one dict per line."""
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                yield json.loads(line)
