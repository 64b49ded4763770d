/**
 * What the readers of a tunnel's options (flags, burrow.yml, the SDK) answer
 * a test: "accepted", or the message of the error they refuse it with.
 */
import { parseTunnelsFile } from "../../src/agent/settings/tunnels-file.ts";

/** Where the burrow.yml of these tests says it lies (its errors name it). */
export const TUNNELS_FILE = "/home/dev/burrow.yml";

/** "accepted" when `read` returns, else the message it threw. */
export function answerOf(read: () => unknown): string {
  try {
    read();
    return "accepted";
  } catch (err) {
    return (err as Error).message;
  }
}

/** What burrow.yml's reader answers `yaml`. */
export const fileSays = (yaml: string): string => answerOf(() => parseTunnelsFile(yaml, TUNNELS_FILE));
