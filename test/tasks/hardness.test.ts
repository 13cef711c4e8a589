import { test } from "node:test";
import assert from "node:assert/strict";
import { hardnessCounts, spiderHardness } from "../../lib/tasks/hardness.js";

// Queries of Spider's dev set with the level Spider's evaluator gives them.
const LEVELS: Array<[string, string]> = [
  ["SELECT count(*) FROM singer", "easy"],
  ["SELECT name ,  country ,  age FROM singer ORDER BY age DESC", "medium"],
  ["SELECT avg(age) ,  min(age) ,  max(age) FROM singer WHERE country  =  'France'", "medium"],
  ["SELECT T2.name FROM singer_in_concert AS T1 JOIN singer AS T2 ON T1.singer_id  =  T2.singer_id JOIN concert AS T3 ON T1.concert_id  =  T3.concert_id WHERE T3.year  =  2014", "hard"],
  ["SELECT name FROM stadium WHERE stadium_id NOT IN (SELECT stadium_id FROM concert)", "hard"],
  ["SELECT country FROM singer WHERE age  >  40 INTERSECT SELECT country FROM singer WHERE age  <  30", "hard"],
  ["SELECT T2.name ,  count(*) FROM concert AS T1 JOIN stadium AS T2 ON T1.stadium_id  =  T2.stadium_id GROUP BY T1.stadium_id", "medium"],
  ["SELECT name ,  capacity FROM stadium WHERE stadium_id IN (SELECT stadium_id FROM concert WHERE YEAR  >  2013 GROUP BY stadium_id ORDER BY count(*) DESC LIMIT 1)", "extra"],
  ["SELECT song_name FROM singer WHERE age  >  (SELECT avg(age) FROM singer)", "hard"],
  ["SELECT T2.name ,  T2.capacity FROM concert AS T1 JOIN stadium AS T2 ON T1.stadium_id  =  T2.stadium_id WHERE T1.year  >=  2014 GROUP BY T2.stadium_id ORDER BY count(*) DESC LIMIT 1", "extra"],
];

test("Spider hardness levels follow the evaluator's component counts", () => {
  for (const [sql, level] of LEVELS) assert.equal(spiderHardness(sql), level, sql);
});

test("component counts: joins, OR, LIKE, nesting and the evaluator's aggregate rule", () => {
  assert.deepEqual(hardnessCounts("SELECT a FROM t WHERE x LIKE '%a%' OR y = 1"), { component1: 3, component2: 0, others: 1 });
  assert.deepEqual(hardnessCounts("SELECT a FROM t WHERE x BETWEEN 1 AND 5"), { component1: 1, component2: 0, others: 0 });
  assert.deepEqual(hardnessCounts("SELECT a FROM t1 JOIN t2 ON t1.i = t2.i JOIN t3 ON t2.j = t3.j"), { component1: 2, component2: 0, others: 0 });
  assert.deepEqual(hardnessCounts("SELECT a FROM t WHERE x IN (SELECT x FROM u) AND y > (SELECT avg(y) FROM u)"), { component1: 1, component2: 2, others: 1 });
  // HAVING's AND counts as an aggregate in the evaluator's count_agg, as does a NOT in WHERE
  assert.deepEqual(hardnessCounts("SELECT a FROM t GROUP BY a HAVING count(*) > 1 AND sum(b) > 2"), { component1: 1, component2: 0, others: 0 });
  assert.deepEqual(hardnessCounts("SELECT count(*) FROM t GROUP BY a HAVING count(*) > 1 AND sum(b) > 2"), { component1: 1, component2: 0, others: 1 });
  assert.equal(spiderHardness("WITH x AS (SELECT 1) SELECT * FROM x"), null);
  assert.equal(spiderHardness("not sql"), null);
});
