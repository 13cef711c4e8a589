"""Adapters from Python trainers to the t2s-lab environment service (`t2s env serve`).

Standard library only, so it drops into any trainer's environment (put this folder on PYTHONPATH):

* ``trl_reward(...)`` returns a TRL ``reward_funcs`` entry, called by GRPOTrainer as
  ``f(prompts=, completions=, completion_ids=, environments=?, **columns)``; the columns of
  ``t2s tasks export --to trl`` (``task_id``, ``db_path``, ``solution``) arrive as kwargs.
* ``T2sSqlEnv`` is TRL's ``environment_factory`` environment; ``T2sSqlTool`` verl's tool (t2s_tools.py).
* ``compute_score(data_source, solution_str, ground_truth, extra_info=None, **kw)`` is verl's custom reward
  function (every reward manager calls it one sample at a time); ``compute_score_batch`` grades a list in
  one request, for callers that hold a batch.

Every reward is the one the kit's own grader gives an episode (same extraction, comparison, preset and gold
cache, and in multi-turn rollouts the same turn and tool-use facts: t2s_episode.py); every tool answer is
the text an episode of the kit shows. The service URL comes from the ``url`` argument or ``$T2S_ENV_URL``
(default ``http://127.0.0.1:8100``), the API key from ``api_key`` or ``$T2S_API_KEY``.
"""

from __future__ import annotations

import json
from typing import Any, Iterable, Optional

from t2s_client import DEFAULT_URL, SQL_TOOL_NAME, T2sEnvClient, T2sEnvError, rewards_of, service_url, target_of
from t2s_episode import EpisodeFacts, trl_episode, verl_episode
from t2s_tools import T2sSqlEnv, T2sSqlTool, ToolResponseLookAlike, sql_tool_schema

__all__ = [
    "DEFAULT_URL", "SQL_TOOL_NAME", "T2sEnvClient", "T2sEnvError", "T2sSqlEnv", "T2sSqlTool", "ToolResponseLookAlike",
    "completion_text", "compute_score", "compute_score_batch", "iter_jsonl", "sql_tool_schema", "trl_reward",
]


def completion_text(completion: Any) -> str:
    """The reply to grade: a plain string, or the last assistant message of a conversational completion."""
    if isinstance(completion, (str, dict, list, tuple)):
        return trl_episode(list(completion) if isinstance(completion, tuple) else completion).final
    raise TypeError(f"a completion must be a string or a list of messages, got {type(completion).__name__}")


def _column(kwargs: dict, name: str, n: int) -> list:
    v = kwargs.get(name)
    return list(v) if isinstance(v, (list, tuple)) else [v] * n


def _stop_ids(eos_token_id: Any, processing_class: Any) -> list:
    """The ids that end a completion that was not cut: TRL's own test uses its tokenizer's EOS and pad ids."""
    ids: list = []
    if eos_token_id is not None:
        ids += list(eos_token_id) if isinstance(eos_token_id, (list, tuple, set)) else [eos_token_id]
    if processing_class is not None:
        tok = getattr(processing_class, "tokenizer", processing_class)
        ids += [i for i in (getattr(tok, "eos_token_id", None), getattr(tok, "pad_token_id", None)) if i is not None]
    return ids


def trl_reward(url: Optional[str] = None, preset: str = "shaped", use_task_id: bool = False, on_error: str = "raise",
               client: Optional[T2sEnvClient] = None, eos_token_id: Any = None, processing_class: Any = None,
               api_key: Optional[str] = None, **grade_options: Any):
    """Returns a TRL reward function graded by the kit.

    Columns: ``db_path`` and ``solution`` (the gold SQL) are sent as {"db", "gold"}; with ``use_task_id``
    (or when they are missing) ``task_id`` is sent and the service grades with that task's own database,
    gold and grading overrides. A completion whose last id in ``completion_ids`` is not an end id
    (``eos_token_id``: an id or a list, and/or ``processing_class``: the trainer's tokenizer, whose EOS and
    pad ids TRL itself uses) is graded ``truncated``, as the kit grades a reply cut by the token budget;
    TRL always passes ``completion_ids``, so one of the two is required. ``environments`` (TRL passes the
    ``T2sSqlEnv`` instances of an ``environment_factory`` run) supply the tool-use facts the tool-rl preset
    scores. ``on_error="none"`` gives None instead of raising for an item the service cannot grade.
    ``grade_options`` (e.g. ``order="anywhere"``) go into every item.
    """
    c = client or T2sEnvClient(url, api_key=api_key)
    stops = _stop_ids(eos_token_id, processing_class)

    def t2s_reward(prompts=None, completions=None, completion_ids=None, environments=None, **kwargs) -> list:
        completions = list(completions or [])
        n = len(completions)
        if completion_ids is not None and not stops:
            raise T2sEnvError("TRL passes completion_ids: give trl_reward(eos_token_id=...) or trl_reward(processing_class=tokenizer) so cut completions grade as truncated")
        ids, dbs, golds = _column(kwargs, "task_id", n), _column(kwargs, "db_path", n), _column(kwargs, "solution", n)
        finish = _column(kwargs, "finish_reason", n)
        token_ids = list(completion_ids) if completion_ids is not None else [None] * n
        envs = list(environments) if environments is not None else [None] * n
        items = []
        for i, completion in enumerate(completions):
            facts = trl_episode(completion, token_ids[i], stops, envs[i])
            facts.cut = facts.cut or finish[i] == "length"
            items.append({**target_of(ids[i], dbs[i], golds[i], use_task_id), **facts.grade_fields(preset), "preset": preset, **grade_options})
        return rewards_of(c, items, on_error)

    t2s_reward.__name__ = f"t2s_{preset.replace('-', '_')}"
    return t2s_reward


_clients: dict = {}


def _shared_client(url: Optional[str], api_key: Optional[str]) -> T2sEnvClient:
    key = (service_url(url), api_key)
    if key not in _clients:
        _clients[key] = T2sEnvClient(key[0], api_key=api_key)
    return _clients[key]


# keyword arguments verl's reward managers add that are not grading options
_VERL_KWARGS = ("reward_router_address", "reward_model_tokenizer")


def _verl_item(solution_str: str, ground_truth: Any, extra_info: Optional[dict], use_task_id: bool, preset: str, options: dict) -> dict:
    info = extra_info or {}
    gold = ground_truth.get("ground_truth") if isinstance(ground_truth, dict) else ground_truth
    facts: EpisodeFacts = verl_episode(solution_str or "", info)
    grading = {k: v for k, v in options.items() if k not in _VERL_KWARGS}
    return {**target_of(info.get("task_id"), info.get("db_path"), gold, use_task_id), **facts.grade_fields(preset), "preset": preset, **grading}


def compute_score(data_source: str, solution_str: str, ground_truth: Any, extra_info: Optional[dict] = None,
                  url: Optional[str] = None, preset: str = "shaped", use_task_id: bool = False, api_key: Optional[str] = None,
                  **options: Any) -> float:
    """verl's custom reward function: the kit's reward of one rollout.

    ``ground_truth`` is the gold SQL (``reward_model.ground_truth`` of the verl export); ``extra_info`` holds
    ``db_path`` and ``task_id``, and in multi-turn rollouts what verl adds (``tool_rewards``: T2sSqlTool's
    per-call verdicts). ``solution_str`` is graded as the kit grades an episode: its final assistant turn,
    ``truncated`` when cut or still asking for a tool, and under tool-rl ``unsafe`` after an unsafe tool query
    (t2s_episode.verl_episode). Extra keyword arguments (``custom_reward_function.reward_kwargs``) choose the
    service ``url``, the ``preset`` and comparison options.
    """
    del data_source  # every source of the export is graded the same way
    item = _verl_item(solution_str, ground_truth, extra_info, use_task_id, preset, options)
    return rewards_of(_shared_client(url, api_key), [item], "raise")[0]


def compute_score_batch(data_sources: list, solution_strs: list, ground_truths: list, extra_infos: Optional[list] = None,
                        url: Optional[str] = None, preset: str = "shaped", use_task_id: bool = False, api_key: Optional[str] = None,
                        **options: Any) -> list:
    """``compute_score`` over lists, in one HTTP batch; returns list[float]."""
    infos = list(extra_infos) if extra_infos is not None else [None] * len(solution_strs)
    items = [_verl_item(s, g, e, use_task_id, preset, options) for s, g, e in zip(solution_strs, ground_truths, infos)]
    del data_sources
    return rewards_of(_shared_client(url, api_key), items, "raise")


def iter_jsonl(path: str) -> Iterable[dict]:
    """The records of a jsonl file (an export's train.jsonl), one dict per line."""
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                yield json.loads(line)
