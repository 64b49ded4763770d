/**
 * The tunnels an agent runs, by where each comes from: the server's remote
 * config for its token (`burrow start --remote`), its command line or
 * burrow.yml, and the agent API (POST /api/tunnels). Each source changes
 * its own list; the agent runs them all together (Agent.retune, which adds
 * and removes tunnels on the live session without touching the others).
 * One name is one tunnel: where two sources name the same tunnel, the
 * server's remote config wins over the file, and the file over the agent
 * API; the one set aside is said once.
 */
import type { AgentTunnel, TunnelChange } from "./client-context.ts";
import type { AgentOutput, TunnelView } from "./output.ts";

/** Where a tunnel comes from, in the order they win a name. */
export const TUNNEL_SOURCES = ["remote", "local", "api"] as const;
export type TunnelSource = (typeof TUNNEL_SOURCES)[number];

/** What the set needs of the agent. */
export interface Retunable {
  retune(tunnels: AgentTunnel[]): Promise<TunnelChange>;
  liveTunnels(): TunnelView[];
}

/** Each source in words, for the line that says a tunnel is set aside. */
const WORDS: Record<TunnelSource, string> = { remote: "server's remote config", local: "command line or config file", api: "agent API" };

export class TunnelSet {
  private readonly sources = new Map<TunnelSource, AgentTunnel[]>();

  constructor(
    private readonly agent: Retunable,
    initial: { source: TunnelSource; tunnels: AgentTunnel[] },
    private readonly out?: Pick<AgentOutput, "notice">,
  ) {
    this.sources.set(initial.source, initial.tunnels);
  }

  /** Every tunnel asked for, one per name, the winning source's. */
  wanted(): (AgentTunnel & { source: TunnelSource })[] {
    const out: (AgentTunnel & { source: TunnelSource })[] = [];
    const taken = new Set<string>();
    for (const source of TUNNEL_SOURCES) {
      for (const t of this.sources.get(source) ?? []) {
        if (taken.has(t.name)) continue;
        taken.add(t.name);
        out.push({ ...t, source });
      }
    }
    return out;
  }

  /** The source a tunnel of this name comes from now, or undefined. */
  sourceOf(name: string): TunnelSource | undefined {
    return this.wanted().find((t) => t.name === name)?.source;
  }

  /** The tunnels live now, with the source each comes from. */
  live(): (TunnelView & { source: TunnelSource | undefined })[] {
    return this.agent.liveTunnels().map((t) => ({ ...t, source: this.sourceOf(t.name) }));
  }

  /** One source's tunnels replaced by these; settles once the agent has carried the change out. */
  set(source: TunnelSource, tunnels: AgentTunnel[]): Promise<TunnelChange> {
    const before = this.setAside();
    this.sources.set(source, tunnels);
    const after = this.wanted();
    for (const [key, { name, source: from }] of this.setAside()) {
      if (before.has(key)) continue;
      const winner = after.find((w) => w.name === name)!;
      this.out?.notice?.(`tunnel '${name}' of the ${WORDS[from]} is set aside: the ${WORDS[winner.source]} has a tunnel of that name`);
    }
    return this.agent.retune(after.map(({ source: _source, ...t }) => t));
  }

  /** The tunnels a source asks for that another source's of the same name wins over, by "source:name". */
  private setAside(): Map<string, { name: string; source: TunnelSource }> {
    const out = new Map<string, { name: string; source: TunnelSource }>();
    const taken = new Set<string>();
    for (const source of TUNNEL_SOURCES) {
      for (const t of this.sources.get(source) ?? []) {
        if (taken.has(t.name)) out.set(`${source}:${t.name}`, { name: t.name, source });
        taken.add(t.name);
      }
    }
    return out;
  }

  /** A tunnel more from `source`, or instead of its own of the same name. */
  add(source: TunnelSource, tunnel: AgentTunnel): Promise<TunnelChange> {
    return this.set(source, [...(this.sources.get(source) ?? []).filter((t) => t.name !== tunnel.name), tunnel]);
  }

  /** The tunnel `name` no longer asked for by `source`. */
  remove(source: TunnelSource, name: string): Promise<TunnelChange> {
    return this.set(source, (this.sources.get(source) ?? []).filter((t) => t.name !== name));
  }
}
