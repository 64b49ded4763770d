/**
 * Visitors without credentials sent at tunnel names over and over while
 * something happens to the tunnels (an agent connecting, reconnecting, a
 * server restarting, another node serving), for tests that no instant lets
 * a visitor through a tunnel's rules. Every answer is kept, in order, and
 * judged afterwards: it must be a refusal the rules give or a page of the
 * edge, never the service's body.
 *
 * Bounded in count and time, whatever happens: the hammer stops at
 * `maxShots` answers or after `maxMs`, and each request gives up after 5 s.
 */

export interface Target {
  /** The tunnel's name, to group answers by. */
  name: string;
  /** The edge port to send to (read at each request: a restarted server may move). */
  port: () => number;
  headers?: Record<string, string>;
}

export interface Shot {
  name: string;
  /** 0 for a request that failed (connection refused or reset while a server restarts). */
  status: number;
  body: string;
  location: string | null;
}

export interface Hammer {
  readonly shots: Shot[];
  /** The answers `leak` (startHammer's option) said broke the rules, as they came. */
  readonly leaked: Shot[];
  /** Answers of `name` with `status` so far (kept as they come: checking after each answer stays cheap). */
  count(name: string, status: number): number;
  /**
   * Resolves once `check` holds (checked after each answer), or as soon as
   * an answer leaked (the caller judges then), or fails after `ms`.
   */
  until(check: () => boolean, ms: number, what: string): Promise<void>;
  /** Stops the visitors and waits for the requests in flight. */
  stop(): Promise<Shot[]>;
}

const REQUEST_TIMEOUT_MS = 5_000;

export function startHammer(targets: Target[], opts: { leak: (shot: Shot) => boolean; concurrency?: number; maxShots?: number; maxMs?: number }): Hammer {
  const shots: Shot[] = [];
  const leaked: Shot[] = [];
  const counts = new Map<string, number>();
  const maxShots = opts.maxShots ?? 40_000;
  const deadline = performance.now() + (opts.maxMs ?? 120_000);
  let stopped = false;
  const listeners = new Set<() => void>();

  async function one(target: Target, fresh: boolean): Promise<Shot> {
    const port = target.port();
    const headers: Record<string, string> = { host: `${target.name}.localhost:${port}`, ...target.headers };
    // half the requests on a connection of their own, the others on kept-alive ones
    if (fresh) headers.connection = "close";
    try {
      const res = await fetch(`http://127.0.0.1:${port}/page`, { headers, redirect: "manual", signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS) });
      return { name: target.name, status: res.status, body: await res.text(), location: res.headers.get("location") };
    } catch {
      return { name: target.name, status: 0, body: "", location: null };
    }
  }

  async function worker(offset: number): Promise<void> {
    for (let n = offset; !stopped && shots.length < maxShots && performance.now() < deadline; n++) {
      const shot = await one(targets[n % targets.length]!, n % 2 === 0);
      shots.push(shot);
      const key = `${shot.name} ${shot.status}`;
      counts.set(key, (counts.get(key) ?? 0) + 1);
      if (opts.leak(shot)) leaked.push(shot);
      for (const l of listeners) l();
    }
  }

  const workers = Array.from({ length: opts.concurrency ?? 4 }, (_, i) => worker(i));

  return {
    shots,
    leaked,
    count: (name, status) => counts.get(`${name} ${status}`) ?? 0,
    until(check, ms, what) {
      return new Promise((resolve, reject) => {
        const done = (err?: Error) => {
          clearTimeout(timer);
          listeners.delete(on);
          if (err) reject(err);
          else resolve();
        };
        const on = () => (leaked.length > 0 || check()) && done();
        const timer = setTimeout(() => done(new Error(`timed out after ${ms} ms waiting for ${what} (${shots.length} answers so far)`)), ms);
        listeners.add(on);
        on();
      });
    },
    async stop() {
      stopped = true;
      await Promise.all(workers);
      return shots;
    },
  };
}

/** The answers of one name. */
export const of = (shots: Shot[], name: string) => shots.filter((s) => s.name === name);

/**
 * Whether an answer breaks the rules: the service's body, or any status but
 * a refusal of the rules (`refusals`, by name), the edge's own pages (404 no
 * tunnel, 502/503/504 agent away or unreachable) and a failed connection.
 */
export function leakOf(marker: string, refusals: Record<string, number[]>): (shot: Shot) => boolean {
  const pages = [0, 404, 502, 503, 504];
  return (s) => s.body.includes(marker) || !(pages.includes(s.status) || (refusals[s.name]?.includes(s.status) ?? false));
}
