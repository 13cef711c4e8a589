"""The HTTP client of `t2s env serve`, standard library only (urllib, json, concurrent.futures).

The service URL is the ``url`` argument, else ``$T2S_ENV_URL``, else ``http://127.0.0.1:8100``; the API key
(needed when the service was started with ``--api-key``) is the ``api_key`` argument, else ``$T2S_API_KEY``.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Optional

DEFAULT_URL = "http://127.0.0.1:8100"
SQL_TOOL_NAME = "execute_sql_query"


class T2sEnvError(RuntimeError):
    """The service refused a request, or an item could not be graded (e.g. a gold query that fails)."""


def service_url(url: Optional[str]) -> str:
    return (url or os.environ.get("T2S_ENV_URL") or DEFAULT_URL).rstrip("/")


class T2sEnvClient:
    """A small HTTP client of the service: batched grading spread over a few threads, the tool, prompts."""

    def __init__(self, url: Optional[str] = None, timeout: float = 120.0, batch_size: int = 64, max_workers: int = 8,
                 api_key: Optional[str] = None):
        self.url = service_url(url)
        self.timeout = timeout
        self.batch_size = max(1, int(batch_size))
        self.max_workers = max(1, int(max_workers))
        self.api_key = api_key if api_key is not None else (os.environ.get("T2S_API_KEY") or None)

    def _call(self, path: str, body: Optional[dict] = None) -> Any:
        data = None if body is None else json.dumps(body).encode("utf-8")
        headers = {"content-type": "application/json"}
        if self.api_key:
            headers["authorization"] = f"Bearer {self.api_key}"
        req = urllib.request.Request(self.url + path, data=data, method="GET" if body is None else "POST", headers=headers)
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
        """The tool turn's text for one call on a task's ({"task_id"}) or a file's ({"db"}) database:
        {"content", "invalid", "unsafe"?} ("unsafe": the query, when the sandbox refused it as unsafe)."""
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


def target_of(task_id: Any = None, db: Any = None, gold: Any = None, use_task_id: bool = False) -> dict:
    """What a grade item names: the task by id, or the database and the gold."""
    if use_task_id and task_id:
        return {"task_id": task_id}
    if db and gold:
        return {"db": db, "gold": gold}
    if task_id:
        return {"task_id": task_id}
    raise T2sEnvError("each sample needs task_id, or db_path and the gold SQL (export with `t2s tasks export`)")


def rewards_of(client: T2sEnvClient, items: list, on_error: str) -> list:
    """The rewards of graded items, in order; an item the service could not grade raises, or is None."""
    out = []
    for answer in client.grade(items):
        if "error" in answer:
            if on_error == "raise":
                raise T2sEnvError(answer["error"])
            out.append(None)
        else:
            out.append(float(answer["reward"]))
    return out
