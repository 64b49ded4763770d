/**
 * `burrow login --server URL`: logs this device in through the browser
 * (RFC 8628: a code the user approves on the server's portal) and saves the
 * server and the token it gets for later `burrow http` / `burrow tcp`.
 * `--token T` saves a token made elsewhere instead, as before.
 */
import { hostname } from "node:os";
import { DeviceLoginError, pollForToken, requestDeviceCodes } from "../agent/device-login.ts";
import { normaliseServerUrl, saveConfig } from "../agent/settings/server-and-token.ts";
import { parseFlags, type FlagTable } from "../config/flags.ts";
import { helpText, type CommandDoc } from "./usage.ts";
import { UsageError } from "../usage-error.ts";

const LOGIN_FLAGS = {
  server: { type: "string", arg: "URL", required: true, help: "the burrow server, e.g. https://tunnels.example.com" },
  token: { type: "string", arg: "T", help: "a device token made elsewhere (brw_...); without it, log in through the browser" },
  "device-name": { type: "string", arg: "NAME", help: "what the portal calls this device (default: this machine's host name)" },
  "no-browser": { type: "boolean", help: "print the address to open, do not open a browser" },
} as const satisfies FlagTable;

export const LOGIN_DOC: CommandDoc = {
  name: "login",
  usage: ["burrow login --server URL [--device-name NAME] [--no-browser]", "burrow login --server URL --token T"],
  about: `Without --token, logs this device in through the browser: prints an address
and a code (and opens the browser on a desktop), and waits while you sign in on
the server's portal and approve the code there (10 minutes at most). Then, or
with --token, saves the server and the token to config.json (mode 0600) in
~/.config/burrow ($XDG_CONFIG_HOME/burrow), ~/Library/Application Support/burrow
on macOS or %APPDATA%\\burrow on Windows, so that burrow http and burrow tcp
need neither flag.`,
  flags: LOGIN_FLAGS,
};

export async function loginCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parseFlags(argv, LOGIN_FLAGS);
  if (values.help) {
    process.stdout.write(helpText(LOGIN_DOC));
    return 0;
  }
  if (positionals.length > 0) throw new UsageError(`unexpected argument '${positionals[0]}'`);
  const rawServer = values.server as string | undefined;
  if (!rawServer) throw new UsageError("burrow login needs --server URL");
  const server = normaliseServerUrl(rawServer);
  const token = values.token as string | undefined;
  if (token !== undefined) {
    if (!token.startsWith("brw_")) throw new UsageError("--token: a burrow token starts with brw_");
    const path = saveConfig({ server, token });
    console.log(`Saved server ${server} and token to ${path}`);
    return 0;
  }
  const deviceName = ((values["device-name"] as string | undefined) ?? hostname()).trim().slice(0, 100) || "a device";
  return loginThroughBrowser(server, deviceName, values["no-browser"] === true);
}

async function loginThroughBrowser(server: string, deviceName: string, noBrowser: boolean): Promise<number> {
  const abort = new AbortController();
  const interrupted = () => abort.abort(new Error("interrupted"));
  process.once("SIGINT", interrupted);
  try {
    const codes = await requestDeviceCodes(server, deviceName);
    console.log(`To log in "${deviceName}", open\n\n  ${codes.verificationUri}\n\nand enter the code  ${codes.userCode}\n`);
    if (codes.verificationUriComplete !== codes.verificationUri) console.log(`(or open ${codes.verificationUriComplete})`);
    if (!noBrowser && openBrowser(codes.verificationUriComplete)) console.log("Opened your browser.");
    console.log(`Waiting for you to approve it (the code is valid ${Math.round(codes.expiresInS / 60)} minutes)...`);
    const got = await pollForToken(server, codes, {
      signal: abort.signal,
      onWait: (why, next) => {
        if (why === "network") console.error(`cannot reach ${server} right now: trying again in ${next} s`);
      },
    });
    const path = saveConfig({ server, token: got.token });
    console.log(`Logged in to ${server} as ${got.username}; the token for "${deviceName}" is saved to ${path}`);
    return 0;
  } catch (err) {
    if (abort.signal.aborted) {
      console.error("burrow login: interrupted; nothing was saved");
      return 130;
    }
    if (err instanceof DeviceLoginError) {
      console.error(`burrow login: ${err.message}`);
      return 1;
    }
    throw err;
  } finally {
    process.off("SIGINT", interrupted);
  }
}

/** Opens `url` in the desktop's browser; false when there is no desktop here (a server, an ssh session without one). */
function openBrowser(url: string): boolean {
  const command =
    process.platform === "darwin"
      ? ["open", url]
      : process.platform === "win32"
        ? ["rundll32", "url.dll,FileProtocolHandler", url]
        : process.env.DISPLAY || process.env.WAYLAND_DISPLAY
          ? ["xdg-open", url]
          : undefined;
  if (!command) return false;
  try {
    const child = Bun.spawn(command, { stdio: ["ignore", "ignore", "ignore"] });
    child.unref();
    return true;
  } catch {
    return false; // no xdg-open: the address is printed above
  }
}
