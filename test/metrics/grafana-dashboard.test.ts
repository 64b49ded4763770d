/**
 * docs/grafana-dashboard.json is built on what the server really exports:
 * every metric a query names is in a real server's /metrics, and every
 * metric the server exports has a panel. The manual's pages name only
 * metrics it exports too.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { scrape, type Exposition } from "../harness/metrics.ts";
import { startServer, type TestServer } from "../harness/server.ts";

const METRICS_TOKEN = "dashboard-test-token-0123";
const dashboard = JSON.parse(readFileSync(join(import.meta.dir, "..", "..", "docs", "grafana-dashboard.json"), "utf8"));

/** Every PromQL query in the dashboard: panels' targets and the template variables'. */
function queries(): string[] {
  const out: string[] = [];
  const walk = (panels: any[]) => {
    for (const p of panels) {
      for (const t of p.targets ?? []) out.push(t.expr);
      walk(p.panels ?? []);
    }
  };
  walk(dashboard.panels);
  for (const v of dashboard.templating?.list ?? []) if (v.type === "query") out.push(typeof v.query === "string" ? v.query : v.query.query);
  return out;
}

const metricNames = (expr: string) => [...expr.matchAll(/\bburrow_[a-z0-9_]+\b/g)].map((m) => m[0]);

let server: TestServer;
let exposition: Exposition;

beforeAll(async () => {
  server = await startServer({ args: ["--metrics-token", METRICS_TOKEN] });
  exposition = await scrape(server.adminUrl, { Authorization: `Bearer ${METRICS_TOKEN}` });
});
afterAll(() => server?.stop());

test("every query names at least one metric, and each one the server exports", () => {
  const all = queries();
  expect(all.length).toBeGreaterThan(20);
  const unknown: string[] = [];
  for (const expr of all) {
    expect(typeof expr).toBe("string");
    const names = metricNames(expr);
    expect(names.length, expr).toBeGreaterThan(0);
    for (const name of names) if (!exposition.names.has(name)) unknown.push(`${name} (in ${expr})`);
  }
  expect(unknown).toEqual([]);
});

test("every metric family the server exports has a panel", () => {
  const used = new Set(queries().flatMap(metricNames));
  const families = [...exposition.text.matchAll(/^# TYPE (\S+) /gm)].map((m) => m[1]!);
  expect(families.length).toBeGreaterThan(20);
  const unused = families.filter((f) => ![...used].some((u) => u === f || u.startsWith(`${f}_`)));
  expect(unused).toEqual([]);
});

test("it is a dashboard Grafana imports: a uid, a data source variable, unique panel ids on the grid", () => {
  expect(dashboard.uid).toBe("burrow-overview");
  expect(dashboard.templating.list.map((v: any) => v.name)).toEqual(["datasource", "instance"]);
  const ids = dashboard.panels.map((p: any) => p.id);
  expect(new Set(ids).size).toBe(ids.length);
  for (const p of dashboard.panels) {
    expect(p.gridPos.w).toBeGreaterThan(0);
    expect(p.gridPos.x + p.gridPos.w).toBeLessThanOrEqual(24);
    if (p.type !== "row") expect(p.datasource.uid).toBe("${datasource}");
  }
});

/** burrow_* words of the manual that are not metrics: cookies, and an HAProxy backend of operations.md. */
const NOT_METRICS = new Set(["burrow_admin", "burrow_portal", "burrow_session", "burrow_session_", "burrow_token"]);

test("every metric the manual's pages name is one the server exports", () => {
  const docs = join(import.meta.dir, "..", "..", "docs");
  const unknown: string[] = [];
  for (const file of readdirSync(docs).filter((f) => f.endsWith(".md"))) {
    for (const name of new Set(metricNames(readFileSync(join(docs, file), "utf8")))) {
      if (NOT_METRICS.has(name)) continue;
      const exported = exposition.names.has(name) || [...exposition.text.matchAll(/^# TYPE (\S+) /gm)].some((m) => name === m[1]);
      if (!exported) unknown.push(`${name} (in docs/${file})`);
    }
  }
  expect(unknown).toEqual([]);
});
