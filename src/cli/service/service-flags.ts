/**
 * `burrow service install|uninstall|status` flags and help. The parsers
 * (service.ts) read these tables; --help and docs/reference/cli.md are
 * made from them.
 */
import type { FlagTable } from "../../config/flags.ts";
import { COMMON } from "../agent-flags.ts";
import type { CommandDoc } from "../usage.ts";
import { DEFAULT_SERVICE_NAME, SERVICE_PLATFORMS } from "./agent-service.ts";

/** Which service: every subcommand takes these. */
const WHICH = {
  user: {
    type: "boolean",
    help: "the user's own service (systemd --user, a LaunchAgent), not the system's",
    details: "Without it: a system service, written as root (systemd's, sandboxed and run as a user systemd makes up; on macOS a LaunchDaemon). Windows has system services only.",
  },
  name: {
    type: "string",
    arg: "NAME",
    default: DEFAULT_SERVICE_NAME,
    help: "the service's name: several agents, several names",
    details: "1-63 characters from a-z, 0-9 and -: the unit is NAME.service, the token file NAME.token.",
  },
  platform: {
    type: "string",
    arg: "P",
    defaultText: "this machine's",
    help: `${SERVICE_PLATFORMS.join(", ")}: whose service files`,
    details: "Another platform's files can be written (with `--root` or `--print`) to be copied there; the service manager is asked only on its own platform.",
  },
  root: {
    type: "string",
    arg: "DIR",
    env: true,
    help: "write and read the files below DIR instead of /, and ask no service manager",
    details: "For packaging and tests: the paths inside the files stay the real ones. `BURROW_SERVICE_ROOT` too.",
  },
} as const satisfies FlagTable;

export const INSTALL_FLAGS = {
  config: {
    type: "string",
    arg: "FILE",
    env: true,
    defaultText: "the burrow.yml burrow start would read",
    help: "the config file whose tunnels the service starts (all of them)",
    details: "Checked as `burrow config check` does before anything is written, and named by its absolute path: the service reads it at each start. A system service cannot read a home directory (the sandbox's `ProtectHome=yes`): keep the file in /etc/burrow, or install with `--user`.",
  },
  remote: {
    type: "boolean",
    help: "no config file: the service runs `burrow start --remote`, the tunnels the server holds for its token",
  },
  ...WHICH,
  server: { ...COMMON.server, details: "Written into the service's command line; without it, the config file's `server:` when the file has one, else `burrow login`'s." },
  token: { ...COMMON.token, details: "Written to the service's token file (mode 0600), never into the service's command line." },
  "token-file": COMMON["token-file"],
  proxy: { ...COMMON.proxy, details: "Written into the service's command line (a service does not inherit this shell's `HTTPS_PROXY`); a proxy URL with a password is refused, since the service file is readable by all. A config file's `proxy:` the agent reads itself." },
  insecure: COMMON.insecure,
  binary: {
    type: "string",
    arg: "PATH",
    defaultText: "this executable; run from source, /usr/local/bin/burrow",
    help: "the burrow the service runs",
  },
  "no-start": { type: "boolean", help: "write the files, but do not enable or start the service" },
  print: { type: "boolean", help: "show the files (the token masked) and write nothing" },
} as const satisfies FlagTable;

export const UNINSTALL_FLAGS = { ...WHICH } as const satisfies FlagTable;
export const STATUS_FLAGS = { ...WHICH } as const satisfies FlagTable;

export const INSTALL_DOC: CommandDoc = {
  name: "service install",
  usage: ["burrow service install [--config FILE | --remote] [--user] [flags]"],
  about: `Runs the agent as a service that starts with the machine (or, with --user,
with the user's session) and is started again when it fails: a systemd unit
on Linux, a launchd job on macOS, a WinSW service on Windows. The token goes
to a file only the service's user reads (mode 0600), passed with --token-file;
server, token and proxy are found as burrow start finds them. Then the
service is enabled and started (not with --no-start or --root).
A unit, plist or service file that burrow did not write is never replaced.`,
  flags: INSTALL_FLAGS,
  groups: [
    { title: "Flags:", flags: ["config", "remote", "user", "name", "binary", "no-start", "print", "platform", "root"] },
    { title: "The server (as burrow start takes it):", flags: ["server", "token", "token-file", "proxy", "insecure"] },
  ],
};

export const UNINSTALL_DOC: CommandDoc = {
  name: "service uninstall",
  usage: ["burrow service uninstall [--user] [--name NAME]"],
  about: `Stops and disables the agent's service, then removes the files burrow service
install wrote (the service file and the token file). The config file is the
user's and stays. A service file burrow did not write is left as it is
(exit 1).`,
  flags: UNINSTALL_FLAGS,
};

export const STATUS_DOC: CommandDoc = {
  name: "service status",
  usage: ["burrow service status [--user] [--name NAME]"],
  about: `Says whether the agent's service is installed, what it runs, whether its
token file is private, and, where systemctl is there to ask, whether it runs.
Exit 0: installed, and running (or nothing to ask); 1: installed and not
running, or its files are not as install wrote them; 3: not installed.`,
  flags: STATUS_FLAGS,
};
