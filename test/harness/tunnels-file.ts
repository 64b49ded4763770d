/** For the tests of burrow.yml's parser: the path the files are read as, and the message a mistake gets. */
import { ConfigFileError, parseTunnelsFile } from "../../src/agent/settings/tunnels-file.ts";

/** Where the tests' burrow.yml is said to be: every message starts with it. */
export const FILE = "/home/dev/burrow.yml";

/** The message parsing `text` as FILE is refused with; fails when it parses, or fails with anything but a ConfigFileError. */
export function parseError(text: string): string {
  try {
    parseTunnelsFile(text, FILE);
  } catch (err) {
    if (err instanceof ConfigFileError) return err.message;
    throw err;
  }
  throw new Error("no error for:\n" + text);
}
