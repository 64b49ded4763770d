/**
 * `burrow service install | uninstall | status` as a program, writing below
 * a test root (--root), never into /etc: the system and user units pass
 * `systemd-analyze verify`, the launchd plist is read by python3's
 * plistlib and the Windows service's XML by its xml.etree; the token file
 * is mode 0600 and the token in no service file; uninstall removes what
 * install wrote and nothing else; a unit burrow did not write is neither
 * replaced nor removed.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { runBurrow } from "../harness/run.ts";
import { python3Json, verifyUnit } from "../harness/service-tools.ts";

const TOKEN = "brw_serviceTestToken0123456789abcdef";
const SERVER = "https://tunnels.example.com";

let scratch: string;
let home: string;
let config: string;
let count = 0;

beforeAll(() => {
  // spaces in every path: each file's quoting is tried
  scratch = mkdtempSync(join(tmpdir(), "burrow service "));
  home = join(scratch, "home dir");
  mkdirSync(home);
  mkdirSync(join(scratch, "etc burrow"));
  config = join(scratch, "etc burrow", "burrow 1.yml");
  writeFileSync(config, "tunnels:\n  web: { proto: http, addr: 3000, subdomain: myapp }\n");
});
afterAll(() => {
  if (scratch) rmSync(scratch, { recursive: true, force: true });
});

const newRoot = () => join(scratch, `root ${++count}`);
const service = (args: string[], env: Record<string, string> = {}) => runBurrow(["service", ...args], { env: { HOME: home, XDG_CONFIG_HOME: "", ...env } });
/** install with the test's server, token and executable (systemd-analyze checks that ExecStart's file runs). */
const install = (root: string, ...args: string[]) => service(["install", "--root", root, "--server", SERVER, "--token", TOKEN, "--binary", process.execPath, ...args]);
const mode = (path: string) => statSync(path).mode & 0o777;

describe("on Linux, a system unit", () => {
  let root: string;
  let unitFile: string;
  let tokenFile: string;
  beforeAll(async () => {
    root = newRoot();
    const out = await install(root, "--config", config, "--platform", "linux");
    expect(out.stderr).toBe("");
    expect(out.code).toBe(0);
    unitFile = join(root, "etc/systemd/system/burrow-agent.service");
    tokenFile = join(root, "etc/burrow/burrow-agent.token");
    // --root asks no service manager: the commands to run are said instead
    expect(out.stdout).toContain("systemctl enable burrow-agent.service");
  });

  test("passes systemd-analyze verify", () => {
    expect(verifyUnit(unitFile)).toEqual({ code: 0, out: "" });
  });

  test("runs burrow start with the config file, the server and the token as a credential, sandboxed as the server's unit", () => {
    const unit = readFileSync(unitFile, "utf8");
    expect(unit).toStartWith("# Written by `burrow service install`");
    expect(unit).toContain(`ExecStart=${process.execPath} start --all --config "${config}" --server ${SERVER} --token-file %d/token --log text\n`);
    expect(unit).toContain("LoadCredential=token:/etc/burrow/burrow-agent.token\n");
    for (const line of ["DynamicUser=yes", "ProtectSystem=strict", "ProtectHome=yes", "NoNewPrivileges=yes", "CapabilityBoundingSet=", "PrivateDevices=yes", "RestrictNamespaces=yes"]) {
      expect(unit).toContain(`\n${line}\n`);
    }
    // restarted after a failure, never given up on, but not after a mistake in the command (exit 2)
    expect(unit).toContain("\nRestart=on-failure\n");
    expect(unit).toContain("\nStartLimitIntervalSec=0\n");
    expect(unit).toContain("\nRestartPreventExitStatus=2\n");
    expect(unit).toMatch(/\nRestartSec=\d+s\n/);
    expect(unit).toContain("\nWantedBy=multi-user.target\n");
  });

  test("the token is in a file of mode 0600, and in no service file", () => {
    expect(readFileSync(tokenFile, "utf8")).toBe(`${TOKEN}\n`);
    expect(mode(tokenFile)).toBe(0o600);
    expect(mode(unitFile)).toBe(0o644);
    expect(readFileSync(unitFile, "utf8")).not.toContain(TOKEN);
  });

  test("status reads the files: installed, what it runs, the token file private", async () => {
    const out = await service(["status", "--root", root, "--platform", "linux"]);
    expect(out.code).toBe(0);
    expect(out.stdout).toContain(`runs:    ${process.execPath} start --all`);
    expect(out.stdout).toContain("(mode 0600)");
  });

  test("installed again, its own unit is replaced, and a token file others could read is made private again", async () => {
    chmodSync(tokenFile, 0o644);
    const status = await service(["status", "--root", root, "--platform", "linux"]);
    expect(status.code).toBe(1);
    expect(status.stdout).toContain("readable by others");
    const again = await install(root, "--config", config, "--platform", "linux");
    expect(again.code).toBe(0);
    expect(again.stdout).toContain(`Replaced ${unitFile}`);
    expect(mode(tokenFile)).toBe(0o600);
  });

  test("uninstall removes the unit and the token file, and leaves the config file", async () => {
    const out = await service(["uninstall", "--root", root, "--platform", "linux"]);
    expect(out.code).toBe(0);
    expect(existsSync(unitFile)).toBe(false);
    expect(existsSync(tokenFile)).toBe(false);
    expect(existsSync(config)).toBe(true);
    const status = await service(["status", "--root", root, "--platform", "linux"]);
    expect(status.code).toBe(3);
    expect(status.stdout).toContain("not installed");
    expect((await service(["uninstall", "--root", root, "--platform", "linux"])).code).toBe(3);
  });
});

test("with --remote the unit runs burrow start --remote, and verifies", async () => {
  const root = newRoot();
  const out = await install(root, "--remote", "--platform", "linux");
  expect(out.code).toBe(0);
  const unitFile = join(root, "etc/systemd/system/burrow-agent.service");
  expect(readFileSync(unitFile, "utf8")).toContain(`ExecStart=${process.execPath} start --remote --server ${SERVER} --token-file %d/token --log text\n`);
  expect(verifyUnit(unitFile)).toEqual({ code: 0, out: "" });
  expect((await install(root, "--remote", "--config", config, "--platform", "linux")).stderr).toContain("--config and --remote");
});

test("a user unit (--user): in the user's config, reading the token file it owns, verified by a user manager", async () => {
  const root = newRoot();
  const out = await install(root, "--config", config, "--user", "--platform", "linux", "--name", "work-agent");
  expect(out.code).toBe(0);
  const unitFile = join(root, home, ".config/systemd/user/work-agent.service");
  const tokenFile = join(home, ".config/burrow/work-agent.token");
  const unit = readFileSync(unitFile, "utf8");
  expect(unit).toContain(`--token-file "${tokenFile}" --log text\n`);
  expect(unit).not.toContain("DynamicUser");
  expect(unit).not.toContain("LoadCredential");
  expect(unit).toContain("\nWantedBy=default.target\n");
  expect(mode(join(root, tokenFile))).toBe(0o600);
  // the user's own folder of it: theirs alone
  expect(mode(join(root, home, ".config/burrow"))).toBe(0o700);
  expect(verifyUnit(unitFile, true)).toEqual({ code: 0, out: "" });
  expect(out.stdout).toContain("systemctl --user enable work-agent.service");
});

test("a unit burrow did not write is neither replaced by install nor removed by uninstall", async () => {
  const root = newRoot();
  const unitFile = join(root, "etc/systemd/system/burrow-agent.service");
  mkdirSync(join(root, "etc/systemd/system"), { recursive: true });
  const theirs = "[Service]\nExecStart=/usr/bin/someone-elses-agent\n";
  writeFileSync(unitFile, theirs);
  const installed = await install(root, "--config", config, "--platform", "linux");
  expect(installed.code).toBe(1);
  expect(installed.stderr).toContain("burrow did not write it");
  expect(readFileSync(unitFile, "utf8")).toBe(theirs);
  // nothing written before the refusal: no token file either
  expect(existsSync(join(root, "etc/burrow/burrow-agent.token"))).toBe(false);
  const removed = await service(["uninstall", "--root", root, "--platform", "linux"]);
  expect(removed.code).toBe(1);
  expect(readFileSync(unitFile, "utf8")).toBe(theirs);
});

test("on macOS, a LaunchAgent plist that plistlib reads back, started again after a failure, its log in ~/Library/Logs", async () => {
  const root = newRoot();
  const out = await install(root, "--config", config, "--user", "--platform", "macos");
  expect(out.code).toBe(0);
  const plist = join(root, home, "Library/LaunchAgents/burrow-agent.plist");
  const tokenFile = join(home, "Library/Application Support/burrow/burrow-agent.token");
  const read = python3Json("import json, plistlib, sys; print(json.dumps(plistlib.load(open(sys.argv[1], 'rb'))))", plist) as Record<string, unknown>;
  expect(read.Label).toBe("burrow-agent");
  expect(read.ProgramArguments).toEqual([process.execPath, "start", "--all", "--config", config, "--server", SERVER, "--token-file", tokenFile, "--log", "text"]);
  expect(read.RunAtLoad).toBe(true);
  expect(read.KeepAlive).toEqual({ SuccessfulExit: false });
  expect(read.ThrottleInterval).toBeGreaterThan(0);
  expect(read.StandardOutPath).toBe(join(home, "Library/Logs/burrow/burrow-agent.log"));
  expect(mode(join(root, tokenFile))).toBe(0o600);
  expect(readFileSync(plist, "utf8")).not.toContain(TOKEN);
  expect(out.stdout).toContain("launchctl bootstrap");
  expect((await service(["uninstall", "--root", root, "--user", "--platform", "macos"])).code).toBe(0);
  expect(existsSync(plist)).toBe(false);
  expect(existsSync(join(root, tokenFile))).toBe(false);
});

test("on macOS, a LaunchDaemon for the system; its plist's strings escaped", async () => {
  const root = newRoot();
  const odd = join(scratch, "a&b <c>");
  mkdirSync(odd);
  const oddConfig = join(odd, "burrow.yml");
  writeFileSync(oddConfig, readFileSync(config));
  expect((await install(root, "--config", oddConfig, "--platform", "macos")).code).toBe(0);
  const read = python3Json("import json, plistlib, sys; print(json.dumps(plistlib.load(open(sys.argv[1], 'rb'))))", join(root, "Library/LaunchDaemons/burrow-agent.plist")) as { ProgramArguments: string[] };
  expect(read.ProgramArguments).toContain(oddConfig);
  expect(read.ProgramArguments).toContain("/Library/Application Support/burrow/burrow-agent.token");
});

test("on Windows, a WinSW service file: its command line splits back into the same words; restarts grow", async () => {
  const root = newRoot();
  const out = await install(root, "--config", config, "--platform", "windows", "--binary", "C:\\Program Files\\burrow\\burrow.exe");
  expect(out.code).toBe(0);
  const xml = join(root, "C/ProgramData/burrow/burrow-agent.xml");
  const read = python3Json(
    "import json, sys, xml.etree.ElementTree as ET; r = ET.parse(sys.argv[1]).getroot(); print(json.dumps({'id': r.findtext('id'), 'executable': r.findtext('executable'), 'arguments': r.findtext('arguments'), 'onfailure': [e.get('delay') for e in r.findall('onfailure')], 'startmode': r.findtext('startmode')}))",
    xml,
  ) as { id: string; executable: string; arguments: string; onfailure: string[]; startmode: string };
  expect(read.id).toBe("burrow-agent");
  expect(read.executable).toBe("C:\\Program Files\\burrow\\burrow.exe");
  expect(read.startmode).toBe("Automatic");
  expect(read.onfailure).toEqual(["5 sec", "30 sec", "5 min"]);
  // the config path has spaces: quoted, as the C runtime splits a command line
  expect(read.arguments).toBe(`start --all --config "${config}" --server ${SERVER} --token-file C:\\ProgramData\\burrow\\burrow-agent.token --log text`);
  expect(mode(join(root, "C/ProgramData/burrow/burrow-agent.token"))).toBe(0o600);
  expect(out.stdout).toContain("icacls");
  expect(out.stdout).toContain("burrow-agent.exe install");
  expect((await service(["install", "--user", "--platform", "windows", "--print", "--token", TOKEN, "--server", SERVER, "--remote"])).stderr).toContain("no --user");
});

test("--print writes nothing and shows the token masked", async () => {
  const root = newRoot();
  const out = await install(root, "--config", config, "--platform", "linux", "--print");
  expect(out.code).toBe(0);
  expect(out.stdout).toContain("# /etc/systemd/system/burrow-agent.service");
  expect(out.stdout).toContain("<the token>");
  expect(out.stdout).not.toContain(TOKEN);
  expect(existsSync(root)).toBe(false);
});

test("what a system service could not use is refused before anything is written: a config file in a home directory, a proxy with a password", async () => {
  const root = newRoot();
  const refusedHome = await service(["install", "--root", root, "--platform", "linux", "--config", "/home/someone/burrow.yml", "--token", TOKEN, "--server", SERVER]);
  expect(refusedHome.code).toBe(2);
  expect(refusedHome.stderr).toContain("is in a home directory, which a system service cannot read");
  const proxied = await install(root, "--config", config, "--platform", "linux", "--proxy", "http://user:s3cret@proxy.example:3128");
  expect(proxied.code).toBe(2);
  expect(proxied.stderr).toContain("has a password");
  expect(proxied.stderr).not.toContain("s3cret");
  expect(existsSync(root)).toBe(false);
});
