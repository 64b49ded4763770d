/**
 * A swarm of agents in one process, for reconnect-storm.test.ts: `count`
 * instances of burrow's own Agent (src/agent/client.ts), each with one http
 * tunnel named `<prefix><i>`, all to the same server with the same token,
 * as that many `burrow http` processes would be (minus the processes).
 *
 *   bun test/chaos/storm-agents.ts --server URL --token T --target 127.0.0.1:PORT --count N [--prefix s] [--parallel 200] [--lifetime-s 120]
 *
 * Prints one line per event worth waiting on:
 *   ready round=K agents=N ms=<since start> same_name=S refused=R reconnecting=C
 *     once every agent has been granted its tunnel K times (round 1: the
 *     first connect; round 2: back after the server restarted ...);
 *     same_name: agents whose K-th grant had their first grant's name
 *   refused code=... message=...   (the first few refusals)
 *   error ...                       (--lifetime-s ran out: a safety net should the test never close stdin)
 *   closed agents=N ms=...          (after stdin ends or SIGTERM: every agent stopped)
 */
import { parseArgs } from "node:util";
import { Agent, type AgentOutput } from "../../src/agent/client.ts";

const { values } = parseArgs({
  options: {
    server: { type: "string" },
    token: { type: "string" },
    target: { type: "string", default: "127.0.0.1:9" },
    count: { type: "string", default: "1000" },
    prefix: { type: "string", default: "storm" },
    parallel: { type: "string", default: "200" },
    "lifetime-s": { type: "string", default: "120" },
  },
});
if (!values.server || !values.token) {
  console.error("usage: storm-agents.ts --server URL --token T --target HOST:PORT --count N");
  process.exit(2);
}
const count = Number(values.count);
const parallel = Number(values.parallel);
const [host, port] = values.target!.split(":") as [string, string];
const started = performance.now();

interface Member {
  agent: Agent;
  run: Promise<number>;
  /** The names granted, one per READY. */
  grants: string[];
}
const members: Member[] = [];
let refused = 0;
let reconnecting = 0;
/** The highest round announced so far. */
let announced = 0;
/** Agents granted their tunnel at least k times, by k. */
const reached = new Map<number, number>();

function granted(m: Member, name: string): void {
  m.grants.push(name);
  const k = m.grants.length;
  reached.set(k, (reached.get(k) ?? 0) + 1);
  while ((reached.get(announced + 1) ?? 0) >= count) {
    announced++;
    const same = members.filter((x) => x.grants.length >= announced && x.grants[announced - 1] === x.grants[0]).length;
    console.log(
      `ready round=${announced} agents=${reached.get(announced)} ms=${Math.round(performance.now() - started)} same_name=${same} refused=${refused} reconnecting=${reconnecting}`,
    );
  }
}

function open(i: number): Promise<void> {
  return new Promise((resolve) => {
    const member = { grants: [] as string[] } as Member;
    const out: AgentOutput = {
      ready(r) {
        const t = r.tunnels[0];
        granted(member, t?.protocol === "http" ? (t.subdomain ?? "?") : "?");
        resolve();
      },
      request() {},
      connection() {},
      reconnecting() {
        reconnecting++;
      },
      notice() {},
      refused(code, message) {
        refused++;
        if (refused <= 5) console.log(`refused code=${code} message=${JSON.stringify(message)}`);
        resolve();
      },
    };
    member.agent = new Agent({
      server: values.server!,
      token: values.token!,
      tunnels: [{ name: "http", request: { protocol: "http", subdomain: `${values.prefix}${i}` }, target: { host, port: Number(port) } }],
      out,
    });
    member.run = member.agent.run();
    members.push(member);
  });
}

let closing: Promise<void> | undefined;
function closeAll(): Promise<void> {
  closing ??= (async () => {
    const t = performance.now();
    for (const m of members) m.agent.stop();
    await Promise.race([Promise.all(members.map((m) => m.run)), Bun.sleep(15_000)]);
    console.log(`closed agents=${members.length} ms=${Math.round(performance.now() - t)}`);
  })();
  return closing;
}
process.on("SIGTERM", () => void closeAll().then(() => process.exit(0)));

const lifetime = setTimeout(() => {
  console.log(`error lifetime of ${values["lifetime-s"]} s over: rounds announced=${announced} reached=${JSON.stringify(Object.fromEntries(reached))} refused=${refused}`);
  void closeAll().then(() => process.exit(1));
}, Number(values["lifetime-s"]) * 1000);
lifetime.unref();

// open them `parallel` at a time, as a fleet coming up would
const inFlight = new Set<Promise<void>>();
for (let i = 0; i < count; i++) {
  const p: Promise<void> = open(i).then(() => void inFlight.delete(p));
  inFlight.add(p);
  if (inFlight.size >= parallel) await Promise.race(inFlight);
}

// hold the agents until stdin ends (the test closes it, or dies)
for await (const _ of Bun.stdin.stream()) {
  // nothing to read: only the end matters
}
await closeAll();
process.exit(0);
