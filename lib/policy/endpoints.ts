/**
 * A fleet of OpenAI-compatible servers that serve one model (e.g. several vLLM replicas): each request
 * goes to the endpoint with the fewest requests outstanding (ties: the one that has answered fewest, then
 * the order given), and a request that failed on one endpoint is tried on the others first.
 */
export class EndpointPool {
  private readonly outstanding = new Map<string, number>();
  private readonly served = new Map<string, number>();

  constructor(readonly urls: readonly string[]) {
    if (urls.length === 0) throw new RangeError("an endpoint pool needs at least one URL");
    for (const u of urls) {
      this.outstanding.set(u, 0);
      this.served.set(u, 0);
    }
  }

  /** The endpoint to send the next request to, avoiding `tried` unless every endpoint is in it. */
  pick(tried: ReadonlySet<string> = new Set()): string {
    const candidates = this.urls.filter((u) => !tried.has(u));
    const from = candidates.length ? candidates : this.urls;
    let best = from[0];
    for (const u of from) {
      const d = this.outstanding.get(u)! - this.outstanding.get(best)!;
      if (d < 0 || (d === 0 && this.served.get(u)! < this.served.get(best)!)) best = u;
    }
    return best;
  }

  /** Runs `job` against the picked endpoint, counting it outstanding meanwhile. */
  async use<T>(url: string, job: (url: string) => Promise<T>): Promise<T> {
    this.outstanding.set(url, this.outstanding.get(url)! + 1);
    try {
      return await job(url);
    } finally {
      this.outstanding.set(url, this.outstanding.get(url)! - 1);
      this.served.set(url, this.served.get(url)! + 1);
    }
  }

  /** Requests in flight per endpoint. */
  inFlight(): Record<string, number> {
    return Object.fromEntries(this.outstanding);
  }
}
