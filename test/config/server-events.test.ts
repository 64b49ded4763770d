/** The events' flags as `burrow server` reads them: a hook or alert webhook that every call would refuse (this machine, a private address) is refused at start, unless --webhook-allow-private on; a switch written alone means on. */
import { expect, test } from "bun:test";
import { parseServerConfig } from "../../src/config/server.ts";

const SECRET = `whsec_${Buffer.alloc(32, 7).toString("base64")}`;
const parse = (argv: string[], env: Record<string, string> = {}) => {
  const r = parseServerConfig(argv, env);
  if (r.help) throw new Error("help");
  return r.config;
};

test("--admission-hook and --alert-webhook on loopback, link-local or a private address: refused at start, naming the flag that allows it", () => {
  for (const url of ["http://127.0.0.1:9000/admit", "http://localhost:9000/admit", "http://[::1]/x", "http://169.254.169.254/latest", "https://10.1.2.3/hook"]) {
    for (const flag of ["--admission-hook", "--alert-webhook"]) {
      expect(() => parse([flag, url], { BURROW_ADMISSION_HOOK_SECRET: SECRET })).toThrow(`${flag}: `);
      expect(() => parse([flag, url], { BURROW_ADMISSION_HOOK_SECRET: SECRET })).toThrow("--webhook-allow-private on allows it");
    }
  }
});

test("with --webhook-allow-private on, or a public address or name, they are taken", () => {
  const local = parse(["--admission-hook", "http://127.0.0.1:9000/admit", "--alert-webhook", "http://127.0.0.1:9000/alerts", "--webhook-allow-private", "on"], { BURROW_ADMISSION_HOOK_SECRET: SECRET });
  expect(local.events.admissionHook?.url).toBe("http://127.0.0.1:9000/admit");
  expect(local.events.alertWebhook?.url).toBe("http://127.0.0.1:9000/alerts");
  const named = parse(["--admission-hook", "https://policy.example.com/admit", "--alert-webhook", "https://93.184.215.14/ops"], { BURROW_ADMISSION_HOOK_SECRET: SECRET });
  expect(named.events.admissionHook?.url).toBe("https://policy.example.com/admit");
  expect(named.events.allowPrivate).toBe(false);
});

test("a switch written alone (--webhook-allow-private, --admission-hook-fail-open) means on; a flag of another kind still needs its value", () => {
  expect(parse(["--webhook-allow-private", "--admission-hook", "http://127.0.0.1:9/admit"], { BURROW_ADMISSION_HOOK_SECRET: SECRET }).events.allowPrivate).toBe(true);
  expect(parse(["--webhook-allow-private"]).events.allowPrivate).toBe(true);
  expect(parse(["--webhook-allow-private", "off"]).events.allowPrivate).toBe(false);
  const hooked = parse(["--admission-hook", "https://policy.example.com/admit", "--admission-hook-fail-open"], { BURROW_ADMISSION_HOOK_SECRET: SECRET });
  expect(hooked.events.admissionHook?.failOpen).toBe(true);
  expect(() => parse(["--webhook-timeout"])).toThrow(/needs a value$/);
});
