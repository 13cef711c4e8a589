"""Tests of t2s_env.py. The offline ones always run; the rest need a running `t2s env serve`:

    T2S_ENV_URL=http://127.0.0.1:8100 \
    T2S_PAIRS_FILE=pairs.jsonl      # {"db","gold","pred","preset","task_id","expected"} per line
    T2S_TOOL_FILE=tool.json         # {"task_id","query","expected"}: an episode's tool-turn text (optional)
    python3 -m unittest integrations/python/test_t2s_env.py

The node test suite (test/envserve/python.test.ts) writes those files from `t2s grade --jsonl` and a real
episode, starts the service on loopback and runs this file.
"""

import asyncio
import json
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import t2s_env  # noqa: E402

URL = os.environ.get("T2S_ENV_URL")
PAIRS = os.environ.get("T2S_PAIRS_FILE")
TOOL = os.environ.get("T2S_TOOL_FILE")


def load_pairs():
    with open(PAIRS, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


class Offline(unittest.TestCase):
    def test_completion_text_takes_strings_and_conversations(self):
        self.assertEqual(t2s_env.completion_text("SELECT 1"), "SELECT 1")
        convo = [{"role": "assistant", "content": "first"}, {"role": "tool", "content": "rows"}, {"role": "assistant", "content": "final"}]
        self.assertEqual(t2s_env.completion_text(convo), "final")
        self.assertEqual(t2s_env.completion_text([{"role": "assistant", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}]), "ab")
        self.assertEqual(t2s_env.completion_text([]), "")
        with self.assertRaises(TypeError):
            t2s_env.completion_text(42)

    def test_unreachable_service_is_a_clear_error(self):
        client = t2s_env.T2sEnvClient("http://127.0.0.1:9", timeout=2)
        with self.assertRaises(t2s_env.T2sEnvError) as ctx:
            client.health()
        self.assertIn("t2s env serve", str(ctx.exception))

    def test_a_sample_without_db_or_task_is_refused(self):
        f = t2s_env.trl_reward("http://127.0.0.1:9")
        with self.assertRaises(t2s_env.T2sEnvError):
            f(prompts=["q"], completions=["SELECT 1"])


@unittest.skipUnless(URL and PAIRS, "needs T2S_ENV_URL and T2S_PAIRS_FILE (a running `t2s env serve`)")
class AgainstService(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.pairs = load_pairs()
        cls.presets = sorted({p["preset"] for p in cls.pairs})

    def by_preset(self, preset):
        return [p for p in self.pairs if p["preset"] == preset]

    def test_trl_plain_completions_match_t2s_grade(self):
        for preset in self.presets:
            ps = self.by_preset(preset)
            f = t2s_env.trl_reward(URL, preset=preset)
            got = f(prompts=[[{"role": "user", "content": "q"}]] * len(ps), completions=[p["pred"] for p in ps],
                    db_path=[p["db"] for p in ps], solution=[p["gold"] for p in ps], task_id=[p["task_id"] for p in ps])
            self.assertEqual(got, [p["expected"] for p in ps], preset)

    def test_trl_conversational_completions_match_t2s_grade(self):
        for preset in self.presets:
            ps = self.by_preset(preset)
            f = t2s_env.trl_reward(URL, preset=preset)
            completions = [[{"role": "assistant", "content": p["pred"]}] for p in ps]
            got = f(prompts=[[{"role": "user", "content": "q"}]] * len(ps), completions=completions,
                    db_path=[p["db"] for p in ps], solution=[p["gold"] for p in ps])
            self.assertEqual(got, [p["expected"] for p in ps], preset)

    def test_trl_by_task_id_matches_for_tasks_without_overrides(self):
        ps = [p for p in self.by_preset(self.presets[0]) if p.get("task_id")]
        f = t2s_env.trl_reward(URL, preset=self.presets[0], use_task_id=True)
        got = f(prompts=None, completions=[p["pred"] for p in ps], task_id=[p["task_id"] for p in ps])
        self.assertEqual(got, [p["expected"] for p in ps])

    def test_verl_compute_score_batch_matches_t2s_grade(self):
        for preset in self.presets:
            ps = self.by_preset(preset)
            got = t2s_env.compute_score_batch([f"t2s-lab/shop"] * len(ps), [p["pred"] for p in ps], [p["gold"] for p in ps],
                                              [{"db_path": p["db"], "task_id": p["task_id"]} for p in ps], url=URL, preset=preset)
            self.assertEqual(got, [p["expected"] for p in ps], preset)

    def test_verl_compute_score_one_at_a_time_matches_t2s_grade(self):
        ps = self.pairs[::5]
        got = [t2s_env.compute_score("t2s-lab/shop", p["pred"], p["gold"], {"db_path": p["db"]}, url=URL, preset=p["preset"]) for p in ps]
        self.assertEqual(got, [p["expected"] for p in ps])

    def test_verl_reward_model_dict_ground_truth(self):
        p = self.pairs[0]
        got = t2s_env.compute_score("t2s-lab/shop", p["pred"], {"ground_truth": p["gold"]}, {"db_path": p["db"]}, url=URL, preset=p["preset"])
        self.assertEqual(got, p["expected"])

    def test_gold_failure_raises_or_gives_none(self):
        p = self.pairs[0]
        f = t2s_env.trl_reward(URL, on_error="none")
        self.assertEqual(f(prompts=None, completions=["SELECT 1"], db_path=[p["db"]], solution=["SELECT nope FROM nowhere"]), [None])
        with self.assertRaises(t2s_env.T2sEnvError):
            t2s_env.trl_reward(URL)(prompts=None, completions=["SELECT 1"], db_path=[p["db"]], solution=["SELECT nope FROM nowhere"])


@unittest.skipUnless(URL and TOOL, "needs T2S_ENV_URL and T2S_TOOL_FILE")
class Tool(unittest.TestCase):
    def test_verl_style_tool_answers_with_the_episode_text(self):
        with open(TOOL, encoding="utf-8") as f:
            spec = json.load(f)
        tool = t2s_env.T2sSqlTool({"url": URL})
        self.assertEqual(tool.name, "execute_sql_query")

        async def run():
            iid = await tool.create(create_kwargs={"task_id": spec["task_id"]})
            text, reward, metrics = await tool.execute(iid, {"query": spec["query"]})
            bad, _, bad_metrics = await tool.execute(iid, "{not json")
            unknown = await tool.execute(iid, {"sql": "SELECT 1"})
            invalid = tool.invalid_calls(iid)
            await tool.release(iid)
            return text, reward, metrics, bad, bad_metrics, unknown, invalid

        text, reward, metrics, bad, bad_metrics, unknown, invalid = asyncio.run(run())
        self.assertEqual(text, spec["expected"])
        self.assertEqual(reward, 0.0)
        self.assertFalse(metrics["invalid"])
        self.assertTrue(bad.startswith("error: the arguments are not valid JSON"))
        self.assertTrue(bad_metrics["invalid"])
        self.assertIn('non-empty string "query"', unknown[0])
        self.assertEqual(invalid, 2)

    def test_schema_name_from_a_verl_style_schema_object(self):
        class Fn:
            name = "execute_sql_query"

        class Schema:
            function = Fn()

        self.assertEqual(t2s_env.T2sSqlTool({"url": URL}, Schema()).name, "execute_sql_query")


if __name__ == "__main__":
    unittest.main()
