/** `burrow login --server URL --token T`: saves both for later `burrow http` / `burrow tcp`. */
import { normaliseServerUrl, saveConfig } from "../agent/settings/server-and-token.ts";
import { parseFlags, type FlagTable } from "../config/flags.ts";
import { helpText, type CommandDoc } from "./usage.ts";
import { UsageError } from "../usage-error.ts";

const LOGIN_FLAGS = {
  server: { type: "string", arg: "URL", required: true, help: "the burrow server, e.g. https://tunnels.example.com" },
  token: { type: "string", arg: "T", required: true, help: "your device token, brw_..." },
} as const satisfies FlagTable;

export const LOGIN_DOC: CommandDoc = {
  name: "login",
  usage: ["burrow login --server URL --token T"],
  about: `Saves the server and token to config.json (mode 0600) in ~/.config/burrow
($XDG_CONFIG_HOME/burrow), ~/Library/Application Support/burrow on macOS or
%APPDATA%\\burrow on Windows, so that burrow http and burrow tcp need neither flag.`,
  flags: LOGIN_FLAGS,
};

export async function loginCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parseFlags(argv, LOGIN_FLAGS);
  if (values.help) {
    process.stdout.write(helpText(LOGIN_DOC));
    return 0;
  }
  if (positionals.length > 0) throw new UsageError(`unexpected argument '${positionals[0]}'`);
  const server = values.server as string | undefined;
  const token = values.token as string | undefined;
  if (!server || !token) throw new UsageError("burrow login needs both --server URL and --token T");
  if (!token.startsWith("brw_")) throw new UsageError("--token: a burrow token starts with brw_");
  const path = saveConfig({ server: normaliseServerUrl(server), token });
  console.log(`Saved server ${normaliseServerUrl(server)} and token to ${path}`);
  return 0;
}
