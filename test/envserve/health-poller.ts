/**
 * A concurrent /health poller for the attack tests: it asks /health again as soon as each answer arrives, and
 * a case asks whether some /health request was both sent and answered while the case's own work was in
 * flight. That is an ordering, not a latency threshold: a server whose event loop is blocked for the length
 * of the case (or a poller in the same blocked process) cannot produce such an answer. Use it around cases
 * that take a while by nature (runaway queries, large files), where one round trip fits inside.
 */
import { request } from "node:http";

export interface HealthPoller {
  /** Runs `work` and resolves with its result; rejects unless some /health was sent and answered while it ran. */
  during<T>(work: () => Promise<T>): Promise<T>;
  /** Answers received so far. */
  readonly answered: number;
  stop(): Promise<void>;
}

interface Answer {
  sent: number;
  answered: number;
}

function getHealth(url: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request(url + "/health", { agent: false }, (res) => {
      res.resume();
      res.on("end", () => resolve(res.statusCode ?? 0));
    });
    req.on("error", reject);
    req.end();
  });
}

/** Starts polling `url`/health; stop() ends the loop. */
export function pollHealth(url: string): HealthPoller {
  let running = true;
  let seq = 0;
  const answers: Answer[] = [];
  const loop = (async () => {
    while (running) {
      const sent = ++seq;
      try {
        const status = await getHealth(url);
        if (status === 200) answers.push({ sent, answered: ++seq });
      } catch {
        // a refused or reset connection is no answer; the case decides what that means
      }
    }
  })();
  return {
    get answered() {
      return answers.length;
    },
    async during<T>(work: () => Promise<T>): Promise<T> {
      const start = ++seq;
      const out = await work();
      const end = ++seq;
      if (!answers.some((a) => a.sent > start && a.answered < end)) {
        throw new Error("/health did not answer while the case ran (no /health request sent after it began was answered before it ended)");
      }
      return out;
    },
    async stop() {
      running = false;
      await loop;
    },
  };
}
