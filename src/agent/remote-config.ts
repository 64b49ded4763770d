/**
 * `burrow start --remote`: the device's tunnels kept on the server for its
 * token (its remote config), run as they come. Each CONFIG (wire.ts) is
 * read by burrow.yml's own reader (settings/tunnels-json.ts) and becomes
 * the set's "remote" tunnels (tunnel-set.ts), which the agent runs on the
 * live connection: new ones added, gone ones removed, the others untouched.
 * One that does not read (a server of another version may take keys this
 * agent does not know) is not taken: the tunnels running stay, and the
 * server hears why (STATUS).
 */
import type { Config } from "../protocol/messages.ts";
import { describeChange } from "./client-changes.ts";
import type { TunnelChange } from "./client-context.ts";
import type { AgentOutput } from "./output.ts";
import { readTunnelsJson, TunnelsJsonError } from "./settings/tunnels-json.ts";
import type { TunnelSet } from "./tunnel-set.ts";

export class RemoteConfig {
  /** The version run now; -1 before the first. */
  version = -1;
  /** Why the last config that came was not taken; undefined when it was. */
  error?: string;
  /** The set the config goes into: set once the agent runs (cli/agent.ts). */
  set?: TunnelSet;

  constructor(
    private readonly out: Pick<AgentOutput, "notice">,
    /** Told when the version run or the error changes (the agent's STATUS). */
    private readonly changed: () => void = () => {},
  ) {}

  /** A CONFIG from the server. */
  received(c: Config): void {
    // an older copy read after a newer one (two changes close together) changes nothing
    if (c.version < this.version) return;
    let tunnels;
    try {
      tunnels = readTunnelsJson({ tunnels: c.tunnels });
    } catch (err) {
      if (!(err instanceof TunnelsJsonError)) throw err;
      this.error = `version ${c.version}: ${err.message}`;
      this.out.notice?.(`the server's config for this device (version ${c.version}) is not taken, the tunnels running stay: ${err.message}`);
      this.changed();
      return;
    }
    const first = this.version < 0;
    const same = c.version === this.version && this.error === undefined;
    this.version = c.version;
    this.error = undefined;
    this.changed();
    if (same || !this.set) return;
    void this.set.set("remote", tunnels).then((change) => {
      if (!first || hasChanges(change)) this.out.notice?.(`the server's config for this device, version ${c.version}: ${describeChange(change)}`);
    });
  }
}

const hasChanges = (c: TunnelChange) => c.added.length + c.refused.length + c.removed.length + c.pending.length > 0;
