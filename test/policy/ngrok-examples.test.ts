/**
 * Policies from ngrok's documentation, run unchanged (test/fixtures/policy/
 * ngrok-*: copied from ngrok's docs, traffic-policy/examples/: the rate
 * limit tiers in YAML and in JSON, and "Deprecate API v2"), with the
 * effect the documentation describes.
 */
import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { defaultServices } from "../../src/policy/index.ts";
import { answered, policyOf, requestInput } from "./policy-harness.ts";

const fixture = (name: string) => readFileSync(join(import.meta.dir, "..", "fixtures", "policy", name), "utf8");

describe("ngrok's rate limit tiers", () => {
  for (const file of ["ngrok-rate-limit-tiers.yml", "ngrok-rate-limit-tiers.json"]) {
    test(`${file}: no Tier header, 10 a minute; Tier: bronze, 100 a minute; each client apart`, async () => {
      const p = policyOf(fixture(file), { services: defaultServices() });
      expect(p.size.on_http_request).toBe(4);
      const free = (ip: string) => p.run("on_http_request", requestInput({ clientIp: ip }));
      for (let i = 0; i < 10; i++) expect((await free("198.51.100.1")).verdict.kind).toBe("continue");
      const over = await free("198.51.100.1");
      expect(answered(over)?.status).toBe(429);
      expect(over.matched.map((r) => r.rule)).toEqual(["Free rate limiting tier"]);
      expect((await free("198.51.100.2")).verdict.kind).toBe("continue");
      const bronze = (ip: string) => p.run("on_http_request", requestInput({ clientIp: ip, headers: [["Tier", "Bronze"]] }));
      for (let i = 0; i < 100; i++) expect((await bronze("198.51.100.3")).verdict.kind).toBe("continue");
      const bronzeOver = await bronze("198.51.100.3");
      expect(answered(bronzeOver)?.status).toBe(429);
      expect(bronzeOver.matched.map((r) => r.rule)).toEqual(["Bronze rate limiting tier"]);
    });
  }
});

describe("ngrok's Deprecate API v2", () => {
  test("X-Api-Version: 2 is answered 400 with the documented JSON; version 3 goes on", async () => {
    const p = policyOf(fixture("ngrok-deprecate-api-v2.yml"));
    const v2 = answered(await p.run("on_http_request", requestInput({ headers: [["X-Api-Version", "2"]] })))!;
    expect(v2.status).toBe(400);
    expect(v2.headers["content-type"]).toBe("application/json");
    expect(JSON.parse(v2.body)).toEqual({ error: { message: "Version 2 of the API is no longer supported. Use Version 3 instead." } });
    expect((await p.run("on_http_request", requestInput({ headers: [["X-Api-Version", "3"]] }))).verdict.kind).toBe("continue");
    expect((await p.run("on_http_request", requestInput())).verdict.kind).toBe("continue");
  });
});
