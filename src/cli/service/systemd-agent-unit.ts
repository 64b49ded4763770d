/**
 * The agent's systemd unit: a system service (sandboxed as the server's,
 * as a user systemd makes up, the token handed over as a credential), or a
 * user service (`--user`: the user's own, reading the token file it owns).
 * Pure text; quoting is systemd-unit.ts's, shared with `burrow server init`.
 */
import { quoteExecWord, SANDBOX } from "../systemd-unit.ts";
import { AGENT_STOP_TIMEOUT_S, agentWords, serviceDescription, WRITTEN_BY, type AgentServiceSpec } from "./agent-service.ts";

/** The systemd version that knows RestartSteps= and RestartMaxDelaySec= (a restart's delay growing). */
export const RESTART_STEPS_SINCE = 254;

/**
 * Restarts after a failure: 1 s growing to 5 min in 10 steps where systemd
 * can (254+), else every 10 s. The agent retries a lost connection itself
 * and exits only on a refusal it cannot get past (a revoked token, say):
 * restarting then is for when an admin puts it right, not a loop at full
 * speed against the server's handshake throttle.
 */
export const RESTART = { firstS: 1, steps: 10, maxDelay: "5min", flatS: 10 } as const;

export interface SystemdAgentOptions {
  /** A user service (`systemctl --user`), else a system one. */
  user: boolean;
  /** The token file the system unit hands over as a credential (root's, mode 0600); unused for a user service. */
  tokenSource?: string;
  /** The machine's systemd knows RestartSteps= (RESTART_STEPS_SINCE). */
  restartSteps: boolean;
  /** The first line, for a unit a package installs instead of the command. */
  header?: string;
}

/** The name of the credential the token is, in the system unit. */
const TOKEN_CREDENTIAL = "token";

/** A literal value for a setting whose line only expands specifiers. */
const literal = (text: string) => text.replaceAll("%", "%%");

export function renderAgentUnit(spec: AgentServiceSpec, o: SystemdAgentOptions): string {
  const words = agentWords(spec);
  // the system unit reads its credential (%d: systemd's directory of them, 248+); a user unit its own file
  const tokenWord = o.user ? quoteExecWord(words.tokenFile) : `%d/${TOKEN_CREDENTIAL}`;
  const exec = [quoteExecWord(spec.binary, true), ...words.before.map((w) => quoteExecWord(w)), tokenWord, ...words.after.map((w) => quoteExecWord(w))];
  const lines = [
    o.header ?? `# ${WRITTEN_BY}; \`burrow service uninstall${o.user ? " --user" : ""}\` removes it.`,
    "[Unit]",
    `Description=${literal(serviceDescription(spec))}`,
    // a user manager has no network-online.target to wait for (the agent retries until the network is there)
    ...(o.user ? [] : ["Wants=network-online.target", "After=network-online.target"]),
    "# never given up for good: the restarts below are spaced out instead",
    "StartLimitIntervalSec=0",
    "",
    "[Service]",
    // exec: a wrong path to the executable fails `systemctl start` instead of looking started
    "Type=exec",
    `ExecStart=${exec.join(" ")}`,
  ];
  if (!o.user) {
    if (o.tokenSource === undefined) throw new Error("a system unit needs the token file it hands over");
    lines.push(
      "# the token stays in a file only root reads; systemd copies it at each start for the service's user alone",
      `LoadCredential=${TOKEN_CREDENTIAL}:${literal(o.tokenSource)}`,
      "# a user systemd makes up for the service: it owns nothing and can write nowhere",
      "DynamicUser=yes",
    );
  }
  lines.push("UMask=0077", "Restart=on-failure", "# exit 2: a mistake in the command or the config file, which a restart does not fix", "RestartPreventExitStatus=2");
  if (o.restartSteps) {
    lines.push(`RestartSec=${RESTART.firstS}s`, `RestartSteps=${RESTART.steps}`, `RestartMaxDelaySec=${RESTART.maxDelay}`);
  } else {
    lines.push(`# systemd before ${RESTART_STEPS_SINCE} has no growing delay (RestartSteps=)`, `RestartSec=${RESTART.flatS}s`);
  }
  lines.push(
    "# SIGTERM: the agent leaves (a pool member finishes what is in flight first)",
    "KillSignal=SIGTERM",
    `TimeoutStopSec=${AGENT_STOP_TIMEOUT_S}`,
  );
  if (o.user) {
    // a user manager runs without the privileges most sandboxing needs; these ask for none
    lines.push("NoNewPrivileges=yes", "LockPersonality=yes", "RestrictRealtime=yes", "RestrictSUIDSGID=yes", "", "[Install]", "WantedBy=default.target", "");
  } else {
    lines.push("# no privilege at all: it binds no port below 1024", "CapabilityBoundingSet=", "# sandbox: as the server's, and it writes nothing", ...SANDBOX, "", "[Install]", "WantedBy=multi-user.target", "");
  }
  return lines.join("\n");
}

/** The machine's systemd version from `systemctl --version` ("systemd 252 (252.39-1)"), or undefined. */
export function systemdVersion(run: (cmd: string[]) => string | undefined = runQuietly): number | undefined {
  const out = run(["systemctl", "--version"]);
  const m = out === undefined ? null : /^systemd (\d+)/.exec(out);
  return m ? Number(m[1]) : undefined;
}

function runQuietly(cmd: string[]): string | undefined {
  if (!Bun.which(cmd[0]!)) return undefined;
  const p = Bun.spawnSync(cmd, { stdout: "pipe", stderr: "ignore", stdin: "ignore" });
  return p.exitCode === 0 ? p.stdout.toString() : undefined;
}
