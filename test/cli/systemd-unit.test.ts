/**
 * The unit `burrow server init` writes, as text: ExecStart quoting by
 * systemd.syntax(7) rules, the capability only for low ports, the stop
 * timeout from --drain-timeout, TLS files as credentials, and no secret in
 * the unit.
 */
import { describe, expect, test } from "bun:test";
import {
  executableProblem,
  needsBindCapability,
  quoteExecWord,
  renderEnvFile,
  renderUnit,
  STOP_MARGIN_S,
  type UnitSpec,
} from "../../src/cli/systemd-unit.ts";

const SPEC: UnitSpec = {
  domain: "tunnels.example.com",
  binary: "/usr/local/bin/burrow",
  serverArgs: ["--domain", "tunnels.example.com"],
  stateDirectory: "burrow",
  envFile: "/etc/burrow/burrow.env",
  ports: [8080, 4041, 4042, 20000],
  drainTimeoutS: 15,
};

/** The value of each `Key=` line of the unit (a key may repeat). */
function settings(unit: string): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const line of unit.split("\n")) {
    const m = /^([A-Za-z]+)=(.*)$/.exec(line);
    if (m) out.set(m[1]!, [...(out.get(m[1]!) ?? []), m[2]!]);
  }
  return out;
}

describe("quoting one word of ExecStart", () => {
  const cases: [string, string, string][] = [
    ["a plain word stays bare", "--http-port", "--http-port"],
    ["a path stays bare", "/var/lib/burrow", "/var/lib/burrow"],
    ["spaces are quoted", "/srv/my certs/cert.pem", '"/srv/my certs/cert.pem"'],
    ["% is doubled (specifiers), and needs no quotes", "50%", "50%%"],
    ["$ is doubled (environment variables)", "$HOME", "$$HOME"],
    ["${X} too (braces are quoted as well)", "a${X}b", "\"a$${X}b\""],
    ["a backslash is escaped", "a\\b", '"a\\\\b"'],
    ["a double quote is escaped", 'say "hi"', '"say \\"hi\\""'],
    ["a single quote is literal inside double quotes", "it's", "\"it's\""],
    ["a lone semicolon is quoted, not a command separator", ";", '";"'],
    ["an empty word is kept as an empty argument", "", '""'],
    ["a newline becomes a C escape", "a\nb", '"a\\x0ab"'],
    ["a tab too", "a\tb", '"a\\x09b"'],
    ["non-ASCII is kept as is", "zürich", '"zürich"'],
  ];
  for (const [name, word, quoted] of cases) {
    test(name, () => expect(quoteExecWord(word)).toBe(quoted));
  }

  test("in the executable, $ stays single: systemd expands no variables there", () => {
    expect(quoteExecWord("/opt/a$b/burrow", true)).toBe("/opt/a$b/burrow");
    expect(quoteExecWord("/opt/my apps/100%/burrow", true)).toBe('"/opt/my apps/100%%/burrow"');
  });

  test("an executable systemd would refuse is named as a problem", () => {
    expect(executableProblem("/usr/local/bin/burrow")).toBeUndefined();
    expect(executableProblem("/opt/my apps/burrow")).toBeUndefined();
    expect(executableProblem("burrow")).toContain("absolute");
    expect(executableProblem('/opt/a"b/burrow')).toContain("quotes");
    expect(executableProblem("/opt/a\\b/burrow")).toContain("backslashes");
  });
});

describe("the unit", () => {
  test("ExecStart runs burrow server with the flags given, the data dir last", () => {
    const unit = renderUnit({ ...SPEC, binary: "/opt/my apps/burrow", serverArgs: ["--domain", "t.example.com", "--host", "a b"] });
    expect(settings(unit).get("ExecStart")).toEqual(['"/opt/my apps/burrow" server --domain t.example.com --host "a b" --data-dir /var/lib/burrow']);
    expect(settings(unit).get("StateDirectory")).toEqual(["burrow"]);
    expect(settings(unit).get("DynamicUser")).toEqual(["yes"]);
  });

  test("a state directory of another name is the data dir", () => {
    const unit = renderUnit({ ...SPEC, stateDirectory: "burrow-b" });
    expect(settings(unit).get("ExecStart")![0]).toEndWith("--data-dir /var/lib/burrow-b");
    expect(settings(unit).get("StateDirectory")).toEqual(["burrow-b"]);
  });

  test("CAP_NET_BIND_SERVICE only when a port is below 1024, and then no other capability", () => {
    const high = settings(renderUnit(SPEC));
    expect(high.has("AmbientCapabilities")).toBe(false);
    expect(high.get("CapabilityBoundingSet")).toEqual([""]);
    for (const ports of [[443, 4041, 4042, 20000], [8080, 4041, 22, 20000], [8080, 4041, 4042, 80]]) {
      const low = settings(renderUnit({ ...SPEC, ports }));
      expect(low.get("AmbientCapabilities")).toEqual(["CAP_NET_BIND_SERVICE"]);
      expect(low.get("CapabilityBoundingSet")).toEqual(["CAP_NET_BIND_SERVICE"]);
    }
    // 0 asks the kernel for any free port, which is never a privileged one
    expect(needsBindCapability([0, 8080])).toBe(false);
    expect(needsBindCapability([1023])).toBe(true);
    expect(needsBindCapability([1024])).toBe(false);
  });

  test("TimeoutStopSec is the drain timeout, rounded up, plus a margin", () => {
    expect(settings(renderUnit(SPEC)).get("TimeoutStopSec")).toEqual([String(15 + STOP_MARGIN_S)]);
    expect(settings(renderUnit({ ...SPEC, drainTimeoutS: 60 })).get("TimeoutStopSec")).toEqual([String(60 + STOP_MARGIN_S)]);
    expect(settings(renderUnit({ ...SPEC, drainTimeoutS: 2.5 })).get("TimeoutStopSec")).toEqual([String(3 + STOP_MARGIN_S)]);
  });

  test("restart, stop signal, descriptors, network ordering and install target", () => {
    const s = settings(renderUnit(SPEC));
    expect(s.get("Restart")).toEqual(["on-failure"]);
    expect(s.get("RestartSec")).toBeDefined();
    expect(s.get("KillSignal")).toEqual(["SIGTERM"]);
    expect(s.get("LimitNOFILE")).toEqual(["65536"]);
    expect(s.get("After")).toEqual(["network-online.target"]);
    expect(s.get("Wants")).toEqual(["network-online.target"]);
    expect(s.get("WantedBy")).toEqual(["multi-user.target"]);
    for (const key of ["NoNewPrivileges", "ProtectSystem", "ProtectHome", "PrivateTmp", "PrivateDevices"]) expect(s.has(key)).toBe(true);
    // the JIT needs writable code pages
    expect(s.has("MemoryDenyWriteExecute")).toBe(false);
  });

  test("TLS files are handed over as credentials, read by systemd as root", () => {
    const unit = renderUnit({ ...SPEC, tls: { cert: "/etc/letsencrypt/live/t/fullchain.pem", key: "/etc/my keys/100%.pem" } });
    const s = settings(unit);
    expect(s.get("LoadCredential")).toEqual(["tls-cert:/etc/letsencrypt/live/t/fullchain.pem", "tls-key:/etc/my keys/100%%.pem"]);
    expect(s.get("ExecStart")![0]).toEndWith("--tls-cert %d/tls-cert --tls-key %d/tls-key");
  });

  test("the password is in neither ExecStart nor Environment=: only the environment file's path is", () => {
    const unit = renderUnit({ ...SPEC, envFile: "/etc/burrow 2/50%.env" });
    const s = settings(unit);
    expect(s.get("EnvironmentFile")).toEqual(["/etc/burrow 2/50%%.env"]);
    expect(s.has("Environment")).toBe(false);
    expect(unit).not.toContain("BURROW_ADMIN_PASSWORD=");
  });

  test("the domain in the description cannot be taken for a specifier", () => {
    expect(settings(renderUnit(SPEC)).get("Description")).toEqual(["burrow tunnel server for tunnels.example.com"]);
  });
});

test("the environment file holds the password as one KEY=VALUE line", () => {
  const text = renderEnvFile("Abc123");
  const assignments = text.split("\n").filter((l) => l !== "" && !l.startsWith("#"));
  expect(assignments).toEqual(["BURROW_ADMIN_PASSWORD=Abc123"]);
});
