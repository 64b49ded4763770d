/**
 * A tunnel kind's command (`burrow http|tcp|tls|udp`): its flags and help,
 * and, where its arguments say more than PORT, HOST:PORT or a URL, how
 * they name its local service. One unit per kind in this folder, gathered
 * in index.ts, whose type demands one for every kind of the kind table.
 */
import type { LocalTarget } from "../../agent/local-target.ts";
import type { CommandDoc } from "../usage.ts";

export interface CliKind {
  /** Its help and its flags (`doc.flags`): what --help prints and docs/reference/cli.md lists. */
  readonly doc: CommandDoc;
  /** Its local service from its argument and flags; none: the argument, as the kind's agent unit takes it (a URL for http). */
  target?(positional: string | undefined, values: Record<string, unknown>): LocalTarget;
}
