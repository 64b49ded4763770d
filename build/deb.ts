/**
 * A Debian package of a linux release executable, made with dpkg-deb:
 *
 *   /usr/bin/burrow                       the executable
 *   /lib/systemd/system/burrow.service    the unit `burrow server init` writes
 *                                         (DynamicUser, StateDirectory=burrow),
 *                                         installed disabled: the admin sets the
 *                                         domain first, then enables it
 *   /etc/burrow/burrow.env                the settings, a conffile (mode 0600):
 *                                         BURROW_DOMAIN and the rest, and the
 *                                         first admin's password
 *   /lib/systemd/system/burrow-agent.service
 *                                         the agent's unit (`burrow service
 *                                         install`'s, sandboxed), installed
 *                                         disabled: it runs the tunnels of
 *                                         /etc/burrow/burrow-agent.yml with the
 *                                         token in /etc/burrow/burrow-agent.token
 *
 * Removing the package stops the service and takes the files away; purging
 * also takes /etc/burrow. The data in /var/lib/burrow (systemd's state
 * directory) is left for the admin to keep or delete. Maintainer scripts
 * call systemctl only on a running systemd, and never when dpkg installs
 * into another root (DPKG_ROOT).
 */
import { chmodSync, copyFileSync, mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { renderUnit } from "../src/cli/systemd-unit.ts";
import { renderAgentUnit } from "../src/cli/service/systemd-agent-unit.ts";

export interface DebOptions {
  executable: string;
  version: string;
  /** Debian's name for the architecture. */
  arch: "amd64" | "arm64";
  outdir: string;
  /** The files' times, in seconds since 1970 (the commit's, so a rebuild gives the same bytes); 0 unless given. */
  epoch?: number;
}

const ENV_FILE = "/etc/burrow/burrow.env";
/** The packaged agent unit's file, and the two files it reads. */
const AGENT_UNIT = "burrow-agent.service";
const AGENT_CONFIG = "/etc/burrow/burrow-agent.yml";
const AGENT_TOKEN = "/etc/burrow/burrow-agent.token";

export const ENV_TEMPLATE = [
  "# Settings of burrow.service (EnvironmentFile=): any server flag as BURROW_<FLAG>=value.",
  "# Set the domain, then: systemctl enable --now burrow",
  "#BURROW_DOMAIN=tunnels.example.com",
  "#BURROW_ACME_EMAIL=you@example.com",
  "# The first admin's password (user 'admin'), read only when the database has no admin yet:",
  "#BURROW_ADMIN_PASSWORD=",
  "",
].join("\n");

const POSTINST = `#!/bin/sh
set -e
# installed disabled: the admin sets BURROW_DOMAIN in ${ENV_FILE}, then enables it
if [ -z "\${DPKG_ROOT:-}" ] && [ -d /run/systemd/system ]; then
	systemctl daemon-reload >/dev/null 2>&1 || true
fi
if [ "$1" = configure ] && [ -z "\${2:-}" ]; then
	echo "burrow: set BURROW_DOMAIN in ${ENV_FILE}, then: systemctl enable --now burrow"
	echo "burrow: for the agent as a service: burrow service install --config FILE (or see ${AGENT_UNIT})"
fi
exit 0
`;

const PRERM = `#!/bin/sh
set -e
if [ "$1" = remove ] && [ -z "\${DPKG_ROOT:-}" ] && [ -d /run/systemd/system ]; then
	systemctl disable --now burrow.service >/dev/null 2>&1 || true
	systemctl disable --now burrow-agent.service >/dev/null 2>&1 || true
fi
exit 0
`;

const POSTRM = `#!/bin/sh
set -e
if [ -z "\${DPKG_ROOT:-}" ] && [ -d /run/systemd/system ]; then
	systemctl daemon-reload >/dev/null 2>&1 || true
fi
if [ "$1" = purge ]; then
	rm -rf "\${DPKG_ROOT:-}/etc/burrow"
	echo "burrow: the data in /var/lib/burrow is kept; delete it yourself if you no longer want it"
fi
exit 0
`;

/** The unit the package installs: `burrow server init`'s, for /usr/bin/burrow and the env file. */
export function packageUnit(): string {
  return renderUnit({
    domain: "the domain in /etc/burrow/burrow.env",
    binary: "/usr/bin/burrow",
    serverArgs: [],
    stateDirectory: "burrow",
    envFile: ENV_FILE,
    // the defaults: 80 and 443 need the bind capability
    ports: [80, 443],
    drainTimeoutS: 30,
  }).replace(/^# Written by `burrow server init`.*\n/, "# Installed by the burrow package; /etc/burrow/burrow.env holds the settings.\n");
}

/**
 * The agent's unit the package installs, disabled: `burrow service
 * install`'s system unit for /usr/bin/burrow, reading the tunnels (and
 * `server:`) of a config file in /etc/burrow and the token beside it. The
 * restarts are spaced as systemd before 254 spaces them, which every
 * systemd the package may meet reads without a warning.
 */
export function packageAgentUnit(): string {
  return renderAgentUnit(
    { name: "burrow-agent", binary: "/usr/bin/burrow", tunnels: { config: AGENT_CONFIG }, tokenFile: AGENT_TOKEN },
    {
      user: false,
      tokenSource: AGENT_TOKEN,
      restartSteps: false,
      header: [
        "# Installed by the burrow package, disabled. To run the agent from it: its tunnels (and server:) in",
        `# ${AGENT_CONFIG}, its token alone in ${AGENT_TOKEN} (mode 0600), then systemctl enable --now burrow-agent.`,
        "# Or: burrow service install, which writes a unit of its own in /etc/systemd/system.",
      ].join("\n"),
    },
  );
}

/** Builds the .deb; returns its path. */
export function buildDeb(opts: DebOptions): string {
  const stage = mkdtempSync(join(tmpdir(), "burrow-deb-"));
  try {
    // the archive's "./" takes the stage's mode: 0755, as the / it is unpacked onto (mkdtemp makes 0700)
    chmodSync(stage, 0o755);
    const at = (path: string, text: string, mode = 0o644) => {
      const file = join(stage, path);
      mkdirSync(join(file, ".."), { recursive: true });
      writeFileSync(file, text);
      chmodSync(file, mode);
    };
    mkdirSync(join(stage, "usr", "bin"), { recursive: true });
    copyFileSync(opts.executable, join(stage, "usr", "bin", "burrow"));
    chmodSync(join(stage, "usr", "bin", "burrow"), 0o755);
    at("lib/systemd/system/burrow.service", packageUnit());
    at(`lib/systemd/system/${AGENT_UNIT}`, packageAgentUnit());
    at("etc/burrow/burrow.env", ENV_TEMPLATE, 0o600);
    const size = Math.ceil(statSync(opts.executable).size / 1024) + 8;
    at(
      "DEBIAN/control",
      [
        "Package: burrow",
        `Version: ${opts.version}`,
        `Architecture: ${opts.arch}`,
        "Maintainer: burrow <burrow@localhost>",
        `Installed-Size: ${size}`,
        "Section: net",
        "Priority: optional",
        "Description: self-hosted tunnels: public HTTP, TCP and UDP ingress to local services",
        " The burrow server (public ingress, admin API and panel) and its agent",
        " (burrow http 3000, burrow tcp 5432), one executable.",
        "",
      ].join("\n"),
    );
    at("DEBIAN/conffiles", `${ENV_FILE}\n`);
    at("DEBIAN/postinst", POSTINST, 0o755);
    at("DEBIAN/prerm", PRERM, 0o755);
    at("DEBIAN/postrm", POSTRM, 0o755);
    mkdirSync(opts.outdir, { recursive: true });
    const out = join(opts.outdir, `burrow_${opts.version}_${opts.arch}.deb`);
    const built = Bun.spawnSync(["dpkg-deb", "--root-owner-group", "-Zgzip", "--build", stage, out], { stdout: "pipe", stderr: "pipe", env: { ...process.env, SOURCE_DATE_EPOCH: String(opts.epoch ?? 0) } });
    if (built.exitCode !== 0) throw new Error(`dpkg-deb failed: ${built.stderr.toString()}`);
    return out;
  } finally {
    rmSync(stage, { recursive: true, force: true });
  }
}
