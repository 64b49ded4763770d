/**
 * What the agent tells the server of itself on a `live` session (wire.ts
 * STATUS), for the server's list of agents: its tunnels by its own names
 * and where each comes from, the remote config's version it runs (or why
 * it could not take the last), and its last error. Sent after READY and
 * after each change, a burst of changes once (STATUS_EVERY_MS).
 */
import type { Status } from "../protocol/messages.ts";
import { FrameType } from "../protocol/wire.ts";
import type { ClientSide } from "./client-context.ts";
import type { TunnelView } from "./output.ts";

/** A STATUS goes at most this often: a reload that changes several tunnels is one. */
export const STATUS_EVERY_MS = 250;

export class StatusReport {
  private timer?: ReturnType<typeof setTimeout>;
  private lastError?: { message: string; at: string };

  constructor(
    private readonly client: ClientSide,
    /** The tunnels live now, and whether the session takes STATUS (READY said `live`). */
    private readonly session: () => { live: boolean; tunnels: TunnelView[] },
  ) {}

  /** Something went wrong that the server's list shows until the next one (a tunnel refused, a config not taken). */
  noteError(message: string): void {
    this.lastError = { message: message.slice(0, 1000), at: new Date().toISOString() };
    this.changed();
  }

  /** What the agent runs changed: a STATUS goes soon. */
  changed(): void {
    if (this.timer) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.send();
    }, STATUS_EVERY_MS);
    this.timer.unref?.();
  }

  private send(): void {
    const { live, tunnels } = this.session();
    const mux = this.client.mux;
    if (!live || !mux || mux.closed) return;
    const { opts } = this.client;
    const config = opts.remote?.state?.();
    const status: Status = {
      tunnels: tunnels.slice(0, 64).map((t) => {
        const source = opts.sourceOf?.(t.name);
        return { name: t.name, id: t.id, ...(source ? { source } : {}) };
      }),
      ...(config && config.version >= 0 ? { config: { version: config.version, ...(config.error ? { error: config.error.slice(0, 1000) } : {}) } } : {}),
      ...(this.lastError ? { error: this.lastError } : {}),
    };
    mux.sendControl(FrameType.STATUS, status);
  }

  stop(): void {
    clearTimeout(this.timer);
  }
}
