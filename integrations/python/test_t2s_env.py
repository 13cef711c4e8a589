"""Tests of t2s_env.py. The offline ones always run; the rest need a running `t2s env serve`:

    T2S_ENV_URL=http://127.0.0.1:8100 \
    T2S_PAIRS_FILE=pairs.jsonl      # {"db","gold","pred","preset","task_id","expected"} per line
    T2S_TOOL_FILE=tool.json         # {"task_id","db","query","expected"}: an episode's tool-turn text
    T2S_EPISODES_FILE=episodes.json # eight kinds of multi-turn episode with the kit's reward per preset
    python3 -m unittest integrations/python/test_t2s_env.py

The node test suite (test/envserve/python.test.ts) writes those files from `t2s grade --jsonl` and real kit
episodes, starts the service on loopback and runs this file. The trainers' call code these tests drive the
adapters through is in trainer_call_sites.py, each function naming the file and commit it follows.
"""

import asyncio
import json
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import t2s_env  # noqa: E402
import t2s_episode  # noqa: E402
import trainer_call_sites as sites  # noqa: E402

URL = os.environ.get("T2S_ENV_URL")
PAIRS = os.environ.get("T2S_PAIRS_FILE")
TOOL = os.environ.get("T2S_TOOL_FILE")
EPISODES = os.environ.get("T2S_EPISODES_FILE")
EOS = 2


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

    def test_trl_completion_ids_without_an_end_id_are_refused(self):
        f = t2s_env.trl_reward("http://127.0.0.1:9")
        with self.assertRaises(t2s_env.T2sEnvError) as ctx:
            f(prompts=["q"], completions=["SELECT 1"], completion_ids=[[5, 2]], db_path=["x"], solution=["SELECT 1"])
        self.assertIn("eos_token_id", str(ctx.exception))

    def test_end_ids_from_a_processing_class(self):
        class Tok:
            eos_token_id, pad_token_id = 7, 0

        class Processor:
            tokenizer = Tok()

        self.assertEqual(t2s_env._stop_ids(None, Processor()), [7, 0])
        self.assertEqual(t2s_env._stop_ids([2, 3], None), [2, 3])

    def test_verl_transcript_final_turn_and_calls(self):
        turns = [{"text": "", "calls": [{"query": "SELECT 1"}]}, {"text": "done", "calls": []}]
        text = sites.verl_decoded_transcript(turns, ["error (unsafe): only one read-only statement"])
        facts = t2s_episode.verl_episode(text, {})
        self.assertEqual(facts.final, "done")
        self.assertEqual([(c.invalid, c.unsafe_query) for c in facts.calls], [(True, "SELECT 1")])
        self.assertEqual(facts.grade_fields("tool-rl"), {"pred": "done", "unsafe_tool_query": "SELECT 1", "invalid_tool_calls": 1})
        self.assertEqual(facts.grade_fields("shaped"), {"pred": "done", "invalid_tool_calls": 1})

    def test_tool_state_float_round_trips(self):
        V = t2s_episode.CallVerdict
        for calls in ([], [V(True)], [V(True, None, 0), V(False, None, 1), V(True, "DELETE", 2)], [V(True, "DELETE", 0), V(True, None, 1)], [V(True, "DELETE", 0), V(True, None, 0)]):
            back = t2s_episode.calls_of_state(t2s_episode.state_of_calls(calls))
            self.assertEqual(t2s_episode.EpisodeFacts("x", False, back).grade_fields("tool-rl").get("invalid_tool_calls"),
                             t2s_episode.EpisodeFacts("x", False, calls).grade_fields("tool-rl").get("invalid_tool_calls"))
            self.assertEqual("unsafe_tool_query" in t2s_episode.EpisodeFacts("x", False, back).grade_fields("tool-rl"),
                             any(c.unsafe_query for c in calls))

    def test_trl_environment_passes_trls_checks_with_one_tool(self):
        tools = sites.trl_check_environment(lambda: t2s_env.T2sSqlEnv("http://127.0.0.1:9"))
        self.assertEqual([t.__name__ for t in tools], ["execute_sql_query"])
        doc = tools[0].__doc__
        self.assertTrue(doc.startswith(t2s_env.sql_tool_schema()["function"]["description"]))
        self.assertIn("query: " + t2s_env.sql_tool_schema()["function"]["parameters"]["properties"]["query"]["description"], doc)
        with self.assertRaises(ValueError):
            sites.trl_check_environment(lambda: t2s_env.T2sSqlTool({"url": "http://127.0.0.1:9"}))

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


def load_tool():
    with open(TOOL, encoding="utf-8") as f:
        return json.load(f)


@unittest.skipUnless(URL and TOOL, "needs T2S_ENV_URL and T2S_TOOL_FILE")
class VerlTool(unittest.TestCase):
    def test_head_agent_loop_call_tool(self):
        spec = load_tool()
        tool = t2s_env.T2sSqlTool({"url": URL})
        tools = {tool.name: tool}
        kwargs = {"execute_sql_query": {"create_kwargs": {"task_id": spec["task_id"]}}}

        async def run():
            ok = await sites.verl_head_call_tool(tools, "execute_sql_query", json.dumps({"query": spec["query"]}), kwargs, agent_data=object())
            empty = await sites.verl_head_call_tool(tools, "execute_sql_query", json.dumps({"query": ""}), kwargs, agent_data=object())
            unsafe = await sites.verl_head_call_tool(tools, "execute_sql_query", json.dumps({"query": "DELETE FROM orders"}), kwargs, agent_data=object())
            broken = await sites.verl_head_call_tool(tools, "execute_sql_query", "{not json", kwargs, agent_data=object())
            return ok, empty, unsafe, broken

        (resp, reward, metrics), empty, unsafe, broken = asyncio.run(run())
        self.assertEqual(resp.text, spec["expected"])
        self.assertEqual(reward, 0.0)
        self.assertEqual(metrics["invalid"], False)
        self.assertTrue(empty[0].text.startswith('error: the arguments need a non-empty string "query"'))
        self.assertEqual((empty[1], empty[2]["invalid"]), (t2s_episode.STEP_INVALID, True))
        self.assertTrue(unsafe[0].text.startswith("error (unsafe)"))
        self.assertEqual((unsafe[1], unsafe[2]["unsafe"]), (t2s_episode.STEP_UNSAFE, True))
        self.assertTrue(broken[0].text.startswith("Error when executing tool:"))
        self.assertEqual(tool._instances, {}, "every instance released: none leaked")

    def test_head_call_tool_many_calls_one_instance_each(self):
        spec = load_tool()
        tool = t2s_env.T2sSqlTool({"url": URL})
        seen = []
        original = tool.create

        async def counting_create(*a, **kw):
            out = await original(*a, **kw)
            seen.append(out[0])
            return out

        tool.create = counting_create
        kwargs = {"execute_sql_query": {"create_kwargs": {"task_id": spec["task_id"]}}}

        async def run():
            return await asyncio.gather(*[sites.verl_head_call_tool({tool.name: tool}, tool.name, json.dumps({"query": spec["query"]}), kwargs, None) for _ in range(6)])

        answers = asyncio.run(run())
        self.assertEqual([a[0].text for a in answers], [spec["expected"]] * 6)
        self.assertEqual(len(set(seen)), 6)
        self.assertEqual(tool._instances, {})

    def test_v050_agent_loop_create_without_arguments(self):
        spec = load_tool()
        tool = t2s_env.T2sSqlTool({"url": URL, "db_path": spec["db"], "verl_api": "0.5"})
        answer = asyncio.run(sites.verl_v050_call_tool({tool.name: tool}, tool.name, json.dumps({"query": spec["query"]})))
        self.assertEqual(answer, {"role": "tool", "content": spec["expected"]})
        self.assertEqual(tool._instances, {})
        bare = t2s_env.T2sSqlTool({"url": URL, "verl_api": "0.5"})
        failed = asyncio.run(sites.verl_v050_call_tool({bare.name: bare}, bare.name, json.dumps({"query": spec["query"]})))
        self.assertIsInstance(failed, t2s_env.T2sEnvError)
        self.assertIn("db_path in the tool config", str(failed))

    def test_sglang_paths_one_instance_per_trajectory(self):
        spec = load_tool()
        calls = [json.dumps({"query": spec["query"]}), json.dumps({"query": ""}), json.dumps({"query": "DELETE FROM orders"})]
        tool = t2s_env.T2sSqlTool({"url": URL})
        texts, reward = asyncio.run(sites.verl_sglang_v060_trajectory(tool, "req-1", {"task_id": spec["task_id"]}, calls))
        self.assertEqual(texts[0], spec["expected"])
        self.assertEqual(reward, -1002.0)
        self.assertEqual(tool._instances, {})
        old = t2s_env.T2sSqlTool({"url": URL, "verl_api": "0.5"})
        texts, reward = asyncio.run(sites.verl_sglang_v050_trajectory(old, "req-2", {"db_path": spec["db"]}, calls[:2]))
        self.assertEqual(texts[0], spec["expected"])
        self.assertIsInstance(texts[0], str)
        self.assertEqual(reward, -1.0)

    def test_schema_name_from_a_verl_style_schema_object(self):
        class Fn:
            name = "execute_sql_query"

        class Schema:
            function = Fn()

        self.assertEqual(t2s_env.T2sSqlTool({"url": URL}, Schema()).name, "execute_sql_query")


@unittest.skipUnless(URL and TOOL, "needs T2S_ENV_URL and T2S_TOOL_FILE")
class TrlEnvironment(unittest.TestCase):
    def test_reset_with_the_row_then_the_tool_text_is_the_episodes(self):
        spec = load_tool()
        env = t2s_env.T2sSqlEnv(URL)
        self.assertIsNone(env.reset(prompt=[{"role": "user", "content": "q"}], task_id=spec["task_id"], solution="SELECT 1"))
        self.assertEqual(sites.trl_environment_tools(env)["execute_sql_query"](query=spec["query"]), spec["expected"])
        env.reset(db_path=spec["db"])
        self.assertEqual(env.calls, [])
        self.assertEqual(env.execute_sql_query(spec["query"]), spec["expected"])
        self.assertEqual(len(env.calls), 1)


def load_episodes():
    with open(EPISODES, encoding="utf-8") as f:
        return json.load(f)


@unittest.skipUnless(URL and EPISODES, "needs T2S_ENV_URL and T2S_EPISODES_FILE")
class MultiTurnRewards(unittest.TestCase):
    """Trainer-side rewards of the eight episode kinds equal the kit's episode grading, for all three presets."""

    @classmethod
    def setUpClass(cls):
        cls.episodes = load_episodes()

    def verl_rollout(self, ep):
        """verl HEAD's ToolAgentLoop over the episode's turns: tool calls through _call_tool, the decoded
        response, and extra_info as the naive reward-loop manager builds it (extra_info + tool_extra_fields)."""
        tool = t2s_env.T2sSqlTool({"url": URL})
        tools_kwargs = {"execute_sql_query": {"create_kwargs": {"task_id": ep["task_id"], "db_path": ep["db"]}}}
        texts, tool_rewards = [], []
        for i, turn in enumerate(ep["turns"]):
            if i == len(ep["turns"]) - 1:
                break
            for args in turn["calls"]:
                resp, reward, _ = asyncio.run(sites.verl_head_call_tool({tool.name: tool}, tool.name, json.dumps(args), tools_kwargs, None))
                texts.append(resp.text)
                tool_rewards.append(reward)
        self.assertEqual(tool._instances, {})
        extra_info = {"task_id": ep["task_id"], "db_path": ep["db"], "episode_style": "tool", "turn_scores": [], "tool_rewards": tool_rewards, "num_turns": 2 * len(ep["turns"])}
        return sites.verl_decoded_transcript(ep["turns"], texts), extra_info

    def test_verl_compute_score(self):
        for ep in self.episodes:
            transcript, extra_info = self.verl_rollout(ep)
            for preset, want in ep["expected"].items():
                got = t2s_env.compute_score("t2s-lab/shop", transcript, ep["gold"], dict(extra_info), url=URL, preset=preset)
                self.assertEqual(got, want["reward"], f"{ep['name']} / {preset}: kit {want['outcome']}")

    def test_verl_compute_score_batch(self):
        rollouts = [self.verl_rollout(ep) for ep in self.episodes]
        for preset in ("shaped", "binary", "tool-rl"):
            got = t2s_env.compute_score_batch(["s"] * len(rollouts), [r[0] for r in rollouts], [ep["gold"] for ep in self.episodes], [r[1] for r in rollouts], url=URL, preset=preset)
            self.assertEqual(got, [ep["expected"][preset]["reward"] for ep in self.episodes], preset)

    def test_the_whole_transcript_is_not_what_the_kit_grades(self):
        # the cases are built so that grading verl's transcript as one reply would differ from the kit
        differ = 0
        for ep in self.episodes:
            transcript, _ = self.verl_rollout(ep)
            plain = t2s_env.T2sEnvClient(URL).grade([{"db": ep["db"], "gold": ep["gold"], "pred": transcript, "preset": "tool-rl"}])[0]
            differ += plain["reward"] != ep["expected"]["tool-rl"]["reward"]
        self.assertGreaterEqual(differ, len(self.episodes) // 2)

    def test_trl_tool_loop_rewards(self):
        for preset in ("shaped", "binary", "tool-rl"):
            envs, completions, ids = [], [], []
            for ep in self.episodes:
                env = t2s_env.T2sSqlEnv(URL)
                env.reset(task_id=ep["task_id"], db_path=ep["db"], solution=ep["gold"])
                completions.append(sites.trl_tool_loop(env, ep["turns"]))
                envs.append(env)
                cut = ep["turns"][-1].get("finish") == "length"
                ids.append([11, 12, 13] if cut else [11, 12, EOS])
            f = t2s_env.trl_reward(URL, preset=preset, eos_token_id=EOS)
            got = f(prompts=[[{"role": "user", "content": "q"}]] * len(completions), completions=completions, completion_ids=ids, environments=envs,
                    task_id=[ep["task_id"] for ep in self.episodes], db_path=[ep["db"] for ep in self.episodes], solution=[ep["gold"] for ep in self.episodes],
                    trainer_state=None, log_extra=None, log_metric=None)
            self.assertEqual(got, [ep["expected"][preset]["reward"] for ep in self.episodes], preset)

    def test_trl_truncation_from_completion_ids(self):
        ep = self.episodes[0]
        final = ep["turns"][-1]["text"]
        f = t2s_env.trl_reward(URL, preset="tool-rl", eos_token_id=[EOS, 0])
        whole, cut, padded = f(prompts=None, completions=[final] * 3, completion_ids=[[5, EOS], [5, 6], [5, 0]], db_path=[ep["db"]] * 3, solution=[ep["gold"]] * 3)
        self.assertEqual((whole, cut, padded), (1.0, -1.0, 1.0))


if __name__ == "__main__":
    unittest.main()
