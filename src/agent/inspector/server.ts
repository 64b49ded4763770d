/**
 * The agent's request inspector (ngrok's :4040): a capture store the
 * agent's tunnels report to, and a small HTTP server for its page and
 * JSON API. startInspector() is all the CLI needs.
 */
import { runtime } from "../../runtime/current.ts";
import type { AgentOutput } from "../output.ts";
import { relayOutput } from "../output-relay.ts";
import { listenOnFirstFree, portRange, showAddress, type ListenAddress } from "./address.ts";
import { createInspectorApp } from "./api.ts";
import { DEFAULT_PORTS, MAX_BODY_BYTES } from "./limits.ts";
import { LiveStreams } from "./live.ts";
import { CaptureStore } from "./store.ts";
import { InspectorPage } from "./ui.ts";
import { FlowList } from "./flows.ts";
import type { TunnelSet } from "../tunnel-set.ts";

export interface InspectorOptions {
  /** --inspect-addr: listen exactly there or fail. Without it, the first free of `ports` on 127.0.0.1. */
  address?: ListenAddress;
  /** Requests kept (--inspect-keep). */
  keep: number;
  /** Bytes of bodies kept, all together (--inspect-memory); the oldest requests leave first past it. */
  memoryBytes?: number;
  /** The ports tried without an address: 4040-4049 unless a test narrows them. */
  ports?: { first: number; last: number };
}

export type InspectorStart =
  | { kind: "listening"; inspector: Inspector }
  /** Every default port is taken; the agent runs without an inspector. `tried`: "127.0.0.1:4040-4049". */
  | { kind: "busy"; tried: string };

/** --inspect-addr could not be listened on. */
export class InspectorListenError extends Error {}

export class Inspector {
  /** The agent's tunnels by source, which the agent API starts and stops (tunnels-api.ts); set by the command that runs the agent. */
  tunnels?: TunnelSet;

  constructor(
    readonly store: CaptureStore,
    private readonly server: { stop(closeActive?: boolean): unknown },
    private readonly live: LiveStreams,
    readonly address: ListenAddress,
    private readonly flows: FlowList,
  ) {}

  /** Where a browser opens it. */
  get url(): string {
    return `http://${showAddress(this.address)}`;
  }

  /**
   * The agent's output with the inspector listening in: each session's
   * tunnels (its ready event) become GET /api/tunnels and what a replay
   * uses; udp flows' events become GET /api/flows.
   */
  watch(out: AgentOutput): AgentOutput {
    const store = this.store;
    const ready: AgentOutput["ready"] = (r) => {
      store.tunnels = r.tunnels;
      store.sessionBegan();
      out.ready(r);
    };
    const flow: AgentOutput["flow"] = (e) => {
      this.flows.heard(e);
      out.flow?.(e);
    };
    // a request the server's traffic policies answered never comes here: its note is listed instead
    const policyNote: AgentOutput["policyNote"] = (tunnel, note) => {
      store.answeredAtEdge(tunnel, note);
      out.policyNote?.(tunnel, note);
    };
    // what the server's traffic policies did with a request they let through: told after its response's head
    const policyPassed: AgentOutput["policyPassed"] = (tunnel, note) => {
      store.passedAtEdge(tunnel, note);
      out.policyPassed?.(tunnel, note);
    };
    // tunnels added and removed on the live session (client-changes.ts)
    const tunnelAdded: AgentOutput["tunnelAdded"] = (t) => {
      store.tunnels = [...store.tunnels.filter((x) => x.name !== t.name), t];
      out.tunnelAdded?.(t);
    };
    const gone = (name: string) => (store.tunnels = store.tunnels.filter((x) => x.name !== name));
    const tunnelRemoved: AgentOutput["tunnelRemoved"] = (name) => {
      gone(name);
      out.tunnelRemoved?.(name);
    };
    const tunnelRefused: AgentOutput["tunnelRefused"] = (name, code, message) => {
      gone(name);
      out.tunnelRefused?.(name, code, message);
    };
    return relayOutput(out, { ready, flow, policyNote, policyPassed, tunnelAdded, tunnelRemoved, tunnelRefused });
  }

  stop(): void {
    this.live.closeAll();
    this.server.stop(true);
  }
}

export function startInspector(opts: InspectorOptions): InspectorStart {
  const store = new CaptureStore(opts.keep, opts.memoryBytes);
  const live = new LiveStreams(store);
  const page = new InspectorPage();
  let server: ReturnType<typeof Bun.serve> | undefined;
  let address: ListenAddress | undefined;
  const flows = new FlowList();
  let inspector: Inspector | undefined;
  const app = createInspectorApp({ store, live, page, flows, bound: () => address!, tunnels: () => inspector?.tunnels });
  const listen = (at: ListenAddress) => {
    server = Bun.serve({
      hostname: at.host,
      port: at.port,
      reusePort: false, // a second agent must move on to the next port, not share this one
      development: false,
      maxRequestBodySize: 4 * MAX_BODY_BYTES,
      fetch: app.fetch,
    });
    address = { host: at.host, port: server.port! };
    return server;
  };
  if (opts.address) {
    try {
      listen(opts.address);
    } catch (err) {
      throw new InspectorListenError(`cannot listen on ${showAddress(opts.address)} for the inspector: ${describeListenError(err)}`);
    }
  } else {
    const ports = opts.ports ?? DEFAULT_PORTS;
    if (!listenOnFirstFree(DEFAULT_PORTS.host, portRange(ports.first, ports.last), listen)) {
      return { kind: "busy", tried: `${DEFAULT_PORTS.host}:${ports.first}-${ports.last}` };
    }
  }
  inspector = new Inspector(store, server!, live, address!, flows);
  return { kind: "listening", inspector };
}

/**
 * The inspector on the runtime's HTTP server (Bun's or Node.js's), for the
 * npm package: on `host`:`port` (0: any free port), or an
 * InspectorListenError saying why not.
 */
export async function serveInspector(opts: { host: string; port: number; keep: number; memoryBytes?: number }): Promise<Inspector> {
  const store = new CaptureStore(opts.keep, opts.memoryBytes);
  const live = new LiveStreams(store);
  const flows = new FlowList();
  let address: ListenAddress | undefined;
  const app = createInspectorApp({ store, live, page: new InspectorPage(), flows, bound: () => address! });
  let served: Awaited<ReturnType<typeof runtime.serve>>;
  try {
    served = await runtime.serve({ hostname: opts.host, port: opts.port, fetch: app.fetch });
  } catch (err) {
    throw new InspectorListenError(`cannot listen on ${showAddress({ host: opts.host, port: opts.port })} for the inspector: ${describeListenError(err)}`);
  }
  address = { host: opts.host, port: served.port };
  return new Inspector(store, served, live, address, flows);
}

function describeListenError(err: unknown): string {
  const e = err as { code?: string; message?: string };
  if (e.code === "EADDRINUSE" || /in use/i.test(e.message ?? "")) return "the port is in use";
  if (e.code === "EADDRNOTAVAIL") return "that address is not one of this machine's";
  if (e.code === "EACCES") return "permission denied (ports below 1024 need privileges)";
  return (e.message ?? String(err)).split("\n")[0]!;
}
