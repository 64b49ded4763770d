/**
 * Discovery takes the endpoints the edge will fetch itself (the signing
 * keys, the token and userinfo endpoints) under the issuer's own rule:
 * https, or plain http on loopback only when the server allows loopback
 * issuers. Otherwise anyone with a token and an https issuer of their own
 * could name http://127.0.0.1:... as its jwks_uri and have the edge fetch
 * from the server's loopback services, which the issuer rule forbids.
 */
import { afterEach, expect, test } from "bun:test";
import { discover } from "../../src/edge/access/oidc-discovery.ts";

const realFetch = globalThis.fetch;
afterEach(() => {
  globalThis.fetch = realFetch;
});

let n = 0;
/** An issuer (a new one each time: discovery caches) whose discovery answers these metadata. */
function issuerAnswering(endpoints: Record<string, string>): string {
  const issuer = `https://idp-${++n}.example.com`;
  globalThis.fetch = (async (input: string | URL | Request) => {
    const url = String(input instanceof Request ? input.url : input);
    if (url !== `${issuer}/.well-known/openid-configuration`) throw new Error(`unexpected fetch of ${url}`);
    const metadata = {
      issuer,
      authorization_endpoint: `${issuer}/authorize`,
      token_endpoint: `${issuer}/token`,
      jwks_uri: `${issuer}/jwks`,
      ...endpoints,
    };
    return new Response(JSON.stringify(metadata), { headers: { "Content-Type": "application/json" } });
  }) as typeof fetch;
  return issuer;
}

test("an https issuer whose endpoints are https is taken", async () => {
  const issuer = issuerAnswering({ userinfo_endpoint: "https://other.example.com/userinfo" });
  const provider = await discover(issuer);
  expect(provider.metadata.jwks_uri).toBe(`${issuer}/jwks`);
});

for (const [name, endpoint] of <[string, string][]>[
  ["jwks_uri", "http://127.0.0.1:4041/api/users"],
  ["jwks_uri", "http://169.254.169.254/latest/meta-data/"],
  ["jwks_uri", "file:///etc/passwd"],
  ["token_endpoint", "http://127.0.0.1:4041/token"],
  ["userinfo_endpoint", "http://[::1]:8080/userinfo"],
]) {
  test(`an https issuer whose ${name} is ${endpoint} is refused, nothing fetched there`, async () => {
    const issuer = issuerAnswering({ [name]: endpoint });
    const err = await discover(issuer).catch((e) => e);
    expect(err.code).toBe("OIDC_DISCOVERY_FAILED");
    expect(err.message).toContain(`its ${name} is not an https URL`);
  });
}
