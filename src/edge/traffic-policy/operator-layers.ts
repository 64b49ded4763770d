/**
 * The operator's policies as this node runs them: loaded from the database
 * (core/traffic-policies.ts) at start, at once after a change made through
 * this process's admin API, and within --policy-reload-interval (POLL_MS by default) of one made on another node
 * (the rows' marks are read that often: one small query), then compiled
 * and handed to the live tunnels (EdgePolicies.setOperator), in place.
 *
 * Fails closed: until the first load, and for a stored document this node
 * cannot load (a cap lowered since it was stored), the layer answers 503
 * and closes connections, rather than letting through what it was to judge.
 */
import { databaseUnavailable } from "../../db/unavailable.ts";
import type { TrafficPolicies } from "../../core/traffic-policies.ts";
import { log, quietWarnings } from "../../log.ts";
import { loadPolicy, type Policy } from "../../policy/index.ts";
import type { Tunnel } from "../registry.ts";
import type { EdgePolicies, OperatorPolicy, PolicyScope } from "./edge-policies.ts";

/** How often the rows' marks are read by default (--policy-reload-interval): a change made on another node reaches this one's tunnels within this (and a load). */
export const POLL_MS = 2_000;

const failures = quietWarnings(10_000);

/** What stands for a layer that is not there to run: 503 for a request, a connection closed. */
function closedLayer(source: string, why: string): Policy {
  const text = JSON.stringify({
    on_tcp_connect: [{ name: why, actions: [{ type: "deny" }] }],
    on_http_request: [{ name: why, actions: [{ type: "custom-response", config: { status_code: 503, body: `This tunnel is not reachable now: ${why}.\n`, headers: { "retry-after": "5" } } }] }],
  });
  const policy = loadPolicy(text, { source });
  if (Array.isArray(policy)) throw new Error(`the closed layer does not load: ${policy[0]?.message}`);
  return policy;
}

/** Stands for the operator's policies until they are first read. */
export const NOT_LOADED = closedLayer("operator's policies", "the server has not read its traffic policies yet");

export class OperatorLayers {
  private marks: string | undefined;
  /** Compiled policies by id and update time: an unchanged one is not compiled again. */
  private compiled = new Map<string, OperatorPolicy>();
  private loading: Promise<void> | undefined;
  private again = false;
  private timer: ReturnType<typeof setInterval> | undefined;
  private stopWatching: (() => void) | undefined;

  constructor(
    private readonly edge: EdgePolicies,
    private readonly store: TrafficPolicies,
    private readonly tunnels: () => Iterable<Tunnel>,
    private readonly pollMs = POLL_MS,
  ) {}

  /** Loads them now, and follows their changes until stop(). */
  start(): Promise<void> {
    this.stopWatching = this.store.watch(() => void this.load());
    this.timer = setInterval(() => void this.load(), this.pollMs);
    this.timer.unref?.();
    return this.load();
  }

  stop(): void {
    clearInterval(this.timer);
    this.stopWatching?.();
  }

  /** Reads the marks, and the policies when they changed; one load at a time (one asked meanwhile runs after). */
  load(): Promise<void> {
    if (this.loading) {
      this.again = true;
      return this.loading;
    }
    this.loading = this.reload()
      .catch((err) => {
        if (databaseUnavailable(err)) failures("unavailable", "operator's traffic policies not read: the database does not answer", { err: String(err) });
        else failures("failed", "operator's traffic policies not read", { err: String(err) });
      })
      .finally(() => {
        this.loading = undefined;
        if (this.again) {
          this.again = false;
          void this.load();
        }
      });
    return this.loading;
  }

  private async reload(): Promise<void> {
    const marks = await this.store.marks();
    if (marks === this.marks) return;
    const rows = await this.store.list();
    const next = new Map<string, OperatorPolicy>();
    const policies: OperatorPolicy[] = [];
    for (const row of rows) {
      const key = `${row.id}@${row.updatedAt}`;
      let p = this.compiled.get(key);
      if (!p) {
        const scope: PolicyScope = row.scope === "user" ? { kind: "user", userId: row.userId! } : row.scope === "hostname" ? { kind: "hostname", hostname: row.hostname! } : { kind: "server" };
        const source = `operator policy ${row.name}`;
        // its rate limits count under its id: an edit keeps counting
        const loaded = loadPolicy(row.document, { source, key: `operator:${row.id}`, limits: this.edge.limits, services: this.edge.services });
        if (Array.isArray(loaded)) log.warn("operator's traffic policy does not load here: its tunnels answer 503", { policy: row.id, name: row.name, err: loaded[0]?.message ?? "" });
        p = { id: row.id, name: row.name, scope, policy: Array.isArray(loaded) ? closedLayer(source, `the server's traffic policy '${row.name}' does not load`) : loaded };
      }
      next.set(key, p);
      policies.push(p);
    }
    this.compiled = next;
    this.marks = marks;
    this.edge.setOperator(policies, this.tunnels());
  }
}
