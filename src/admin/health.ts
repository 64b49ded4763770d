/**
 * GET /healthz and GET /readyz on the admin port, for load balancers and
 * systemd watchdogs: no session, tiny bodies, never cached.
 *
 * - /healthz: the process answers: 200 `ok`.
 * - /readyz: 200 `{"status":"ready"}` when every check passes (the database
 *   takes a write, the public port and the agents' port accept), else 503
 *   `{"status":"not ready","not_ready":["database"]}`. Only the names of the
 *   failing checks are shown to whoever asks; why is in the server's log,
 *   once when it stops being ready and once when it is ready again.
 *
 * The checks run at most once a CHECK_EVERY_MS: a flood of probes reads the
 * last result and costs the database nothing.
 */
import { log } from "../log.ts";
import type { Route } from "./context.ts";
import { json } from "../api/http.ts";
import { ReadyJson } from "../api/responses.ts";

export const CHECK_EVERY_MS = 1_000;

/** A check returns undefined when ready, or why not (for the log). */
export type ReadinessChecks = Record<string, () => string | undefined | Promise<string | undefined>>;

export class Readiness {
  private last: { at: number; failing: { name: string; why: string }[] } | undefined;
  /** The checks under way: probes that come meanwhile share their answer. */
  private running: Promise<{ name: string; why: string }[]> | undefined;

  constructor(
    private readonly checks: ReadinessChecks,
    private readonly now: () => number = () => performance.now(),
  ) {}

  /** The checks that fail now (at most CHECK_EVERY_MS old). */
  async failing(): Promise<{ name: string; why: string }[]> {
    const t = this.now();
    if (this.last && t - this.last.at < CHECK_EVERY_MS) return this.last.failing;
    this.running ??= this.check(t).finally(() => (this.running = undefined));
    return this.running;
  }

  private async check(t: number): Promise<{ name: string; why: string }[]> {
    const failing: { name: string; why: string }[] = [];
    for (const [name, check] of Object.entries(this.checks)) {
      let why: string | undefined;
      try {
        why = await check();
      } catch (err) {
        why = err instanceof Error ? err.message : String(err);
      }
      if (why !== undefined) failing.push({ name, why });
    }
    // logged when what fails, or why, changes: a database that was out of reach and is now a
    // read-only standby says so, rather than the first reason standing for the whole outage
    const why = (list: { name: string; why: string }[]) => list.map((f) => `${f.name}: ${f.why}`).join("; ");
    if (why(failing) !== why(this.last?.failing ?? [])) {
      if (failing.length > 0) log.warn("not ready", { not_ready: failing.map((f) => f.name).join(","), why: why(failing) });
      else if (this.last) log.info("ready again");
    }
    this.last = { at: t, failing };
    return failing;
  }
}

export function healthRoutes(readiness: Readiness): Route[] {
  return [
    {
      path: "/healthz",
      public: true,
      methods: {
        GET: () => new Response("ok\n", { headers: { "Content-Type": "text/plain; charset=utf-8", "Cache-Control": "no-store" } }),
      },
      docs: {
        GET: {
          summary: "Liveness: the process answers (no session needed)",
          responses: { 200: { description: "ok", raw: { contentType: "text/plain", schema: { type: "string", const: "ok\n" } } } },
        },
      },
    },
    {
      path: "/readyz",
      public: true,
      methods: {
        async GET() {
          const failing = await readiness.failing();
          if (failing.length === 0) return json({ status: "ready" });
          return json({ status: "not ready", not_ready: failing.map((f) => f.name) }, 503);
        },
      },
      docs: {
        GET: {
          summary: "Readiness: the database takes writes and the public and agents' ports accept (no session needed)",
          responses: {
            200: { description: "Ready", schema: ReadyJson },
            503: { description: "Not ready: the names of the failing checks", schema: ReadyJson },
          },
        },
      },
    },
  ];
}
