/**
 * The agent's side of a change of its tunnels, without a server: what a
 * change does by the tunnels' names (planChange: kept, replaced, taken in
 * place, gone, new), which source wins a name (TunnelSet: the server's
 * remote config, then the command line or file, then the agent API), and
 * the remote config taken or not (RemoteConfig: an older copy changes
 * nothing, one the agent cannot read leaves the tunnels running and says
 * why).
 */
import { describe, expect, test } from "bun:test";
import { planChange } from "../../src/agent/client-changes.ts";
import type { AgentTunnel, TunnelChange } from "../../src/agent/client-context.ts";
import { RemoteConfig } from "../../src/agent/remote-config.ts";
import { parseTarget } from "../../src/agent/settings/tunnel-options.ts";
import { tunnelOf } from "../../src/agent/settings/tunnel-spec.ts";
import { TunnelSet } from "../../src/agent/tunnel-set.ts";

const http = (name: string, port: number, subdomain?: string): AgentTunnel => ({ name, ...tunnelOf({ kind: "http", target: parseTarget(String(port), true), ...(subdomain ? { subdomain } : {}) }) });
const askedAs = (tunnels: AgentTunnel[]) => new Map(tunnels.map((t) => [t.name, JSON.stringify(t.request)]));
const NONE: TunnelChange = { added: [], refused: [], removed: [], pending: [], reconnected: false };

describe("planChange: a change by the tunnels' names", () => {
  test("kept tunnels stay the same objects (with the names they were granted); a new one comes; a gone one goes", () => {
    const a = http("a", 3000, "a");
    const now = [a, http("b", 3001, "b")];
    const asked = askedAs(now);
    a.request = { ...a.request, subdomain: "a" } as AgentTunnel["request"]; // as granted
    const plan = planChange(now, [http("a", 3000, "a"), http("c", 3002, "c")], asked);
    expect(plan.next[0]).toBe(a);
    expect(plan.gone.map((t) => t.name)).toEqual(["b"]);
    expect(plan.come.map((t) => t.name)).toEqual(["c"]);
    expect(plan.moved).toEqual([]);
  });

  test("a tunnel whose server side changed is replaced; one whose local service alone changed is taken in place", () => {
    const now = [http("a", 3000, "a"), http("b", 3001, "b")];
    const plan = planChange(now, [http("a", 3000, "a-renamed"), http("b", 4001, "b")], askedAs(now));
    expect(plan.gone.map((t) => t.name)).toEqual(["a"]);
    expect(plan.come.map((t) => t.name)).toEqual(["a"]);
    expect(plan.moved.map((m) => [m.kept.name, m.to.target.port])).toEqual([["b", 4001]]);
  });

  test("the same list: nothing to do", () => {
    const now = [http("a", 3000)];
    const plan = planChange(now, [http("a", 3000)], askedAs(now));
    expect([plan.gone, plan.come, plan.moved]).toEqual([[], [], []]);
  });
});

describe("TunnelSet: one name is one tunnel", () => {
  function set() {
    const asked: AgentTunnel[][] = [];
    const notices: string[] = [];
    const s = new TunnelSet({ retune: async (t) => (asked.push(t), NONE), liveTunnels: () => [] }, { source: "local", tunnels: [http("web", 3000), http("api", 3001)] }, { notice: (m) => void notices.push(m) });
    return { s, asked, notices };
  }

  test("the server's remote config wins a name over the file, and the file over the agent API; the one set aside is said once", async () => {
    const { s, asked, notices } = set();
    await s.add("api", http("extra", 3009));
    await s.add("api", http("web", 3010));
    expect(s.sourceOf("web")).toBe("local");
    await s.set("remote", [http("api", 3005, "from-server")]);
    expect(s.sourceOf("api")).toBe("remote");
    expect(asked.at(-1)!.map((t) => [t.name, t.target.port])).toEqual([
      ["api", 3005],
      ["web", 3000],
      ["extra", 3009],
    ]);
    expect(notices).toEqual([
      "tunnel 'web' of the agent API is set aside: the command line or config file has a tunnel of that name",
      "tunnel 'api' of the command line or config file is set aside: the server's remote config has a tunnel of that name",
    ]);
    await s.set("remote", [http("api", 3005, "from-server")]);
    expect(notices.length).toBe(2);
    // the server's gone: the file's comes back
    await s.set("remote", []);
    expect(s.sourceOf("api")).toBe("local");
  });
});

describe("RemoteConfig: the server's config taken, or not", () => {
  function remote() {
    const sets: string[][] = [];
    const notices: string[] = [];
    let changed = 0;
    const r = new RemoteConfig({ notice: (m) => void notices.push(m) }, () => void changed++);
    r.set = { set: async (_source: string, t: AgentTunnel[]) => (sets.push(t.map((x) => x.name)), NONE) } as unknown as TunnelSet;
    return { r, sets, notices, changed: () => changed };
  }

  test("each new version is run; an older copy, or the same version again, changes nothing", async () => {
    const { r, sets } = remote();
    r.received({ version: 2, tunnels: { web: { proto: "http", addr: 3000 } } });
    r.received({ version: 1, tunnels: { old: { proto: "http", addr: 3000 } } });
    r.received({ version: 2, tunnels: { web: { proto: "http", addr: 3000 } } });
    r.received({ version: 3, tunnels: {} });
    await Bun.sleep(0);
    expect(sets).toEqual([["web"], []]);
    expect(r.version).toBe(3);
  });

  test("a config this agent cannot read is not taken: the tunnels running stay, and why is said and kept for the server", async () => {
    const { r, sets, notices, changed } = remote();
    r.received({ version: 1, tunnels: { web: { proto: "http", addr: 3000 } } });
    r.received({ version: 2, tunnels: { web: { proto: "http", addr: 3000, from_the_future: true } } });
    await Bun.sleep(0);
    expect(sets).toEqual([["web"]]);
    expect(r.version).toBe(1);
    expect(r.error).toStartWith("version 2: tunnels.web.from_the_future: unknown key");
    expect(notices.at(-1)).toContain("is not taken, the tunnels running stay");
    expect(changed()).toBeGreaterThanOrEqual(2);
  });
});
