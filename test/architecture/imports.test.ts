/**
 * The shape of src/, kept by a test: every folder has a layer, and a file
 * may import only from its own folder, from a lower layer, or from the few
 * top-level modules everyone uses (log, version...). An import that runs
 * back up (metrics -> edge, db -> config, edge -> cluster) or a cycle
 * between folders fails here, naming the file and the import. The agent
 * has a stricter rule: it becomes a library, so it may import only what
 * carries no server (no core, no database); and sdk/, that library, may
 * import only what the agent may.
 *
 * docs/architecture.md ("Layout") says what each folder is for; this table
 * is the same order.
 */
import { describe, expect, test } from "bun:test";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve, sep } from "node:path";

const SRC = resolve(import.meta.dir, "..", "..", "src");
/** The npm package burrow-agent, beside src/: it bundles the agent and whatever the agent imports. */
const SDK = resolve(import.meta.dir, "..", "..", "sdk");

/** Lower imports nothing higher. Folders on one layer do not import each other. */
const LAYERS: Record<string, number> = {
  // nothing of ours below them
  protocol: 0, // frames, mux, keepalive: bytes in, bytes out
  os: 0, // what the machine gives the process: file descriptors, the kernel's socket table
  db: 0, // tables, migrations, SQLite and PostgreSQL
  tls: 0, // certificates and which one a server name gets
  runtime: 0, // what the agent needs of Bun or Node.js: sockets, the WebSocket client, UDP, a timer
  signing: 0, // minisign signatures: made for a release, checked by what downloads one
  // plumbing over the protocol
  http: 1, // addresses, request targets, header lists
  sockets: 1, // Bun sockets and links carrying frames or a stream's bytes
  update: 1, // releases: the signed list, the download, the replacement; burrow update and the server's daily look
  http2: 2, // HTTP/2 as bytes: frames, HPACK, the server connection with its streams, flow control and limits
  validate: 2, // what a value must look like, shared by server, agent and panel
  ui: 2, // browser building blocks the admin panel and the portal share: components, styles, formats
  core: 3, // the rules: users, tokens, admission, limits, audit
  dns: 4, // the DNS responder and the dns-check verdicts
  metrics: 4, // counters and the Prometheus registry
  api: 4, // what the admin API and the portal share: JSON bodies and answers, views, cross-site refusal
  policy: 4, // traffic policy: rules in CEL with actions, loaded, checked and run on facts the edge gives
  acme: 5, // certificates from an ACME CA
  webhooks: 5, // events sent: the delivery worker, signed POSTs within limits, where they may go, the admission hook
  agent: 5, // the agent: connects, serves streams to the local service
  edge: 6, // the public face: ingress, agents' endpoint, tunnels
  cluster: 7, // several nodes: the shared registry, the relay between nodes
  ssh: 7, // the SSH gateway: OpenSSH's -R and -L as tunnels and connectors, plugged into the edge
  admin: 7, // the admin API and panel
  portal: 7, // users' own sign-in page and API on the apex, device login, invitations
  config: 7, // the server's settings
  // server.ts (8) builds the server from its parts
  cli: 9, // commands, flags, output
  // main.ts (10) picks a command
};
/** Top-level modules every folder may use; they import only each other. */
const SHARED_FILES = new Set(["log.ts", "log-redact.ts", "version.ts", "durable.ts", "usage-error.ts", "env.d.ts"]);
/** The top-level files that are not shared: the wiring and the entry point. */
const TOP_FILES: Record<string, number> = { "server.ts": 8, "main.ts": 10 };
/** What the agent may import besides its own folder: nothing that carries the server. */
const AGENT_MAY_IMPORT = new Set(["protocol", "sockets", "http", "http2", "validate", "runtime"]);

interface Arrow {
  from: string;
  to: string;
  line: number;
}

function sourceFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return sourceFiles(path);
    return /\.(ts|tsx)$/.test(name) ? [path] : [];
  });
}

const SPECIFIER = /(?:\bfrom\s*|\bimport\s*\(?\s*)["'](\.{1,2}\/[^"']+)["']/g;

/** Every relative import in src/ (or in another folder's files), as src-relative paths. */
function arrows(files = sourceFiles(SRC)): Arrow[] {
  const out: Arrow[] = [];
  for (const file of files) {
    const text = readFileSync(file, "utf8");
    for (const m of text.matchAll(SPECIFIER)) {
      const target = resolve(dirname(file), m[1]!);
      const line = text.slice(0, m.index).split("\n").length;
      out.push({ from: relative(SRC, file), to: relative(SRC, target), line });
    }
  }
  return out;
}

/** A path's folder under src/, or the file itself for top-level modules; undefined outside src/. */
function unitOf(path: string): string | undefined {
  if (path.startsWith("..")) return undefined;
  const parts = path.split(sep);
  return parts.length > 1 ? parts[0]! : parts[0];
}

function layerOf(unit: string): number | undefined {
  if (SHARED_FILES.has(unit)) return -1;
  return TOP_FILES[unit] ?? LAYERS[unit];
}

/** Why an arrow breaks the rules, or undefined when it keeps them. */
function violation(a: Arrow): string | undefined {
  const from = unitOf(a.from);
  const to = unitOf(a.to);
  if (!from || !to || from === to) return undefined;
  const lf = layerOf(from);
  const lt = layerOf(to);
  if (lf === undefined) return `${from} has no layer: add it to LAYERS (and to the table in docs/architecture.md)`;
  if (lt === undefined) return `${to} has no layer: add it to LAYERS (and to the table in docs/architecture.md)`;
  if (from === "agent" && lt >= 0 && !AGENT_MAY_IMPORT.has(to)) return `the agent may import only ${[...AGENT_MAY_IMPORT].join(", ")} (it becomes a library without the server)`;
  if (lf === -1 && lt === -1) return undefined; // the shared modules among themselves
  if (lt >= lf) return `runs back up: ${from} (layer ${lf}) imports ${to} (layer ${lt})`;
  return undefined;
}

/**
 * Why an import of sdk/ breaks the rules: the package may import only what
 * the agent may (the agent itself, the folders it may import and the
 * shared modules), so that nothing of the server is bundled into it.
 */
function sdkViolation(a: Arrow): string | undefined {
  const to = unitOf(a.to);
  if (to === undefined) return a.to.startsWith(`..${sep}sdk${sep}`) ? undefined : "outside src/ and sdk/";
  if (to === "agent" || AGENT_MAY_IMPORT.has(to) || SHARED_FILES.has(to)) return undefined;
  return `sdk/ may import only what the agent may: agent, ${[...AGENT_MAY_IMPORT].join(", ")} and the shared modules`;
}

/** The loops of files importing each other round a cycle (Tarjan's strongly connected components of more than one file). */
function fileCycles(edges: Arrow[]): string[][] {
  const next = new Map<string, string[]>();
  for (const a of edges) next.set(a.from, [...(next.get(a.from) ?? []), a.to]);
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (v: string) => {
    index.set(v, index.size);
    low.set(v, index.get(v)!);
    stack.push(v);
    onStack.add(v);
    for (const w of next.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) !== index.get(v)) return;
    const component: string[] = [];
    let w: string;
    do {
      w = stack.pop()!;
      onStack.delete(w);
      component.push(w);
    } while (w !== v);
    if (component.length > 1) found.push(component.sort());
  };
  for (const v of next.keys()) if (!index.has(v)) visit(v);
  return found;
}

describe("the structure of src/", () => {
  const all = arrows();

  test("the source is read: hundreds of files and imports between them", () => {
    // a broken reader would pass every rule below by finding nothing
    expect(sourceFiles(SRC).length).toBeGreaterThan(200);
    expect(all.filter((a) => unitOf(a.from) !== unitOf(a.to)).length).toBeGreaterThan(300);
  });

  test("every folder of src/ has a layer", () => {
    const folders = readdirSync(SRC).filter((n) => statSync(join(SRC, n)).isDirectory());
    expect(folders.filter((f) => LAYERS[f] === undefined)).toEqual([]);
    const files = readdirSync(SRC).filter((n) => !statSync(join(SRC, n)).isDirectory());
    expect(files.filter((f) => !SHARED_FILES.has(f) && TOP_FILES[f] === undefined)).toEqual([]);
  });

  test("no import runs back up, and the agent imports nothing of the server", () => {
    const broken = all.flatMap((a) => {
      const why = violation(a);
      return why ? [`src/${a.from}:${a.line} imports src/${a.to}: ${why}`] : [];
    });
    expect(broken).toEqual([]);
  });

  test("no files import each other, directly or round a loop (type imports included)", () => {
    expect(fileCycles(all).map((c) => c.join(" -> "))).toEqual([]);
  });

  test("sdk/ imports only what the agent may", () => {
    const sdk = arrows(sourceFiles(SDK).filter((f) => !f.includes(`${sep}node_modules${sep}`)));
    // a broken reader would pass by finding nothing: the package is the agent's client and its options
    expect(sdk.filter((a) => unitOf(a.to) === "agent").length).toBeGreaterThan(3);
    const broken = sdk.flatMap((a) => {
      const why = sdkViolation(a);
      return why ? [`${a.from.replace(`..${sep}`, "")}:${a.line} imports src/${a.to}: ${why}`] : [];
    });
    expect(broken).toEqual([]);
  });

  test("the cycle finder finds a loop of three and a pair, and nothing in a chain", () => {
    const arrow = (from: string, to: string): Arrow => ({ from, to, line: 1 });
    expect(fileCycles([arrow("a", "b"), arrow("b", "c"), arrow("c", "a"), arrow("d", "e"), arrow("e", "d"), arrow("f", "a")]).map((c) => c.join(","))).toEqual(["a,b,c", "d,e"]);
    expect(fileCycles([arrow("a", "b"), arrow("b", "c")])).toEqual([]);
  });

  test("docs/architecture.md's table puts every folder and top-level file on the layer it has here", () => {
    const page = readFileSync(resolve(import.meta.dir, "..", "..", "docs", "architecture.md"), "utf8");
    const rows = [...page.matchAll(/^\| (\d+) \| `([a-z0-9.-]+)\/?` \|/gm)].map((m) => [m[2]!, Number(m[1])] as const);
    expect(Object.fromEntries(rows)).toEqual({ ...LAYERS, ...TOP_FILES });
  });

  test("the rule itself: an arrow up, a cycle's back edge and the agent reaching into core are each caught", () => {
    expect(violation({ from: "metrics/process.ts", to: "edge/descriptors.ts", line: 1 })).toMatch(/runs back up/);
    expect(violation({ from: "edge/server.ts", to: "cluster/relay.ts", line: 1 })).toMatch(/runs back up/);
    expect(violation({ from: "cluster/relay.ts", to: "admin/app.ts", line: 1 })).toMatch(/runs back up/);
    expect(violation({ from: "agent/access.ts", to: "core/access.ts", line: 1 })).toMatch(/the agent may import only/);
    expect(violation({ from: "edge/quota.ts", to: "server.ts", line: 1 })).toMatch(/runs back up/);
    expect(violation({ from: "log.ts", to: "edge/server.ts", line: 1 })).toMatch(/runs back up/);
    expect(violation({ from: "nowhere/x.ts", to: "core/x.ts", line: 1 })).toMatch(/has no layer/);
    expect(violation({ from: "edge/server.ts", to: "log.ts", line: 1 })).toBeUndefined();
    expect(violation({ from: "cluster/relay.ts", to: "edge/registry.ts", line: 1 })).toBeUndefined();
    expect(sdkViolation({ from: "../sdk/src/index.ts", to: "edge/registry.ts", line: 1 })).toMatch(/sdk\/ may import only what the agent may/);
    expect(sdkViolation({ from: "../sdk/src/index.ts", to: "core/access.ts", line: 1 })).toMatch(/sdk\/ may import only/);
    expect(sdkViolation({ from: "../sdk/src/index.ts", to: "agent/client.ts", line: 1 })).toBeUndefined();
    expect(sdkViolation({ from: "../sdk/src/reach.ts", to: "../sdk/src/errors.ts", line: 1 })).toBeUndefined();
  });
});
