/**
 * `burrow keys add FILE`: adds an SSH public key to the user this device is
 * logged in as (`burrow login`), so that plain `ssh -R` opens tunnels
 * through the server's SSH gateway. The key goes to the portal with the
 * device's token (POST /_burrow/api/device/ssh-keys): it is a device of the
 * user's (max_devices counts it), and it is that token's too, so revoking
 * the token removes it. A private key given by mistake is refused here and
 * never sent.
 */
import { existsSync, readFileSync, statSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import { resolveCredentials } from "../agent/settings/server-and-token.ts";
import { parseFlags, type FlagTable } from "../config/flags.ts";
import { UsageError } from "../usage-error.ts";
import { helpText, type CommandDoc } from "./usage.ts";

/** A .pub file is one line; anything much larger is not one. */
const MAX_KEY_FILE_BYTES = 16 * 1024;
const REQUEST_TIMEOUT_MS = 15_000;

const KEYS_ADD_FLAGS = {
  name: { type: "string", arg: "NAME", defaultText: "the key's comment", help: "what the portal and the admin panel call the key" },
  server: { type: "string", arg: "URL", alsoEnv: ["BURROW_SERVER"], defaultText: "burrow login's", help: "the burrow server" },
  token: { type: "string", arg: "T", alsoEnv: ["BURROW_TOKEN"], defaultText: "burrow login's", help: "the device token to add it with (it then goes with that token: revoking the token removes the key)" },
} as const satisfies FlagTable;

export const KEYS_ADD_DOC: CommandDoc = {
  name: "keys add",
  usage: ["burrow keys add [FILE] [--name NAME]"],
  about: `Adds an SSH public key (FILE, by default ~/.ssh/id_ed25519.pub) to the user
this device is logged in as (burrow login), so that ssh -R opens tunnels
through the server's SSH gateway. ed25519, ecdsa and RSA (2048 bits or more).
Prints the gateway's address and its host key fingerprints to check at the
first ssh.`,
  flags: KEYS_ADD_FLAGS,
};

const httpBase = (server: string) => server.replace(/^ws(s?):\/\//, "http$1://").replace(/\/+$/, "");

/** The public key line of `file`, read here; a private key is refused without a word of it repeated. */
export function readKeyFile(file: string): string {
  let path = file;
  if (!existsSync(path)) throw new UsageError(`no such file: ${file}`);
  if (statSync(path).size > MAX_KEY_FILE_BYTES) throw new UsageError(`${file} is too large to be a public key`);
  let text = readFileSync(path, "utf8");
  if (/PRIVATE KEY/.test(text)) {
    // the private half by mistake: its .pub beside it is what was meant
    if (existsSync(`${path}.pub`)) throw new UsageError(`${file} is a private key: give its public half, ${file}.pub`);
    throw new UsageError(`${file} is a private key: give the public one (the .pub file); nothing was sent`);
  }
  text = text.trim();
  if (text === "") throw new UsageError(`${file} is empty`);
  return text;
}

export async function keysCommand(argv: string[]): Promise<number> {
  if (argv[0] !== "add") {
    if (argv[0] === "--help" || argv[0] === "-h" || argv[0] === undefined) {
      process.stdout.write(helpText(KEYS_ADD_DOC));
      return argv[0] === undefined ? 2 : 0;
    }
    throw new UsageError(`unknown command 'keys ${argv[0]}' (burrow keys add FILE)`);
  }
  const { values, positionals } = parseFlags(argv.slice(1), KEYS_ADD_FLAGS);
  if (values.help) {
    process.stdout.write(helpText(KEYS_ADD_DOC));
    return 0;
  }
  if (positionals.length > 1) throw new UsageError(`unexpected argument '${positionals[1]}'`);
  const file = positionals[0] ?? join(homedir(), ".ssh", "id_ed25519.pub");
  const key = readKeyFile(file);
  const { server, token } = resolveCredentials({ server: values.server as string | undefined, token: values.token as string | undefined });
  const base = httpBase(server);
  let res: Response;
  try {
    res = await fetch(`${base}/_burrow/api/device/ssh-keys`, {
      method: "POST",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json", accept: "application/json" },
      body: JSON.stringify({ key, ...(values.name ? { name: values.name } : {}) }),
      redirect: "error",
      signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
    });
  } catch (err) {
    console.error(`burrow keys add: cannot reach ${server}: ${(err as Error).message}`);
    return 1;
  }
  const body = (await res.json().catch(() => ({}))) as { error?: string; name?: string; fingerprint?: string };
  if (res.status === 404) {
    console.error(`burrow keys add: ${server} has no portal, or is too old for SSH keys; ask its admin to add the key`);
    return 1;
  }
  if (res.status !== 201) {
    console.error(`burrow keys add: ${body.error ?? `the server answered ${res.status}`}`);
    return 1;
  }
  console.log(`Added SSH key '${body.name}' (${body.fingerprint}).`);
  const ssh = (await fetch(`${base}/_burrow/api/ssh`, { signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS) })
    .then((r) => r.json())
    .catch(() => undefined)) as { port: number | null; command: string | null; host_keys: { type: string; fingerprint: string }[] } | undefined;
  if (ssh?.port && ssh.command) {
    console.log(`\nOpen a tunnel with it:\n\n  ${ssh.command}\n`);
    console.log("At your first ssh, check that the server's host key is one of:");
    for (const k of ssh.host_keys) console.log(`  ${k.type.padEnd(8)} ${k.fingerprint}`);
  } else {
    console.log("The server's SSH gateway is off (--ssh-port): the key works once its admin turns it on.");
  }
  return 0;
}
