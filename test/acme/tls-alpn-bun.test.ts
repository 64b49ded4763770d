/**
 * Why burrow does not answer TLS-ALPN-01 (RFC 8737): the CA connects to
 * port 443 offering only the ALPN protocol `acme-tls/1` and expects a
 * challenge certificate in that handshake. The public HTTPS port is a
 * Bun.serve, which does not negotiate `acme-tls/1` even when its TLS
 * options list it; a raw Bun.listen TLS socket does. If the first test here
 * starts failing, Bun.serve has learned it and TLS-ALPN-01 became possible.
 */
import { describe, expect, test } from "bun:test";
import { connect } from "node:tls";
import { selfSignedCertificate } from "../harness/certs.ts";
import { within } from "../harness/wait.ts";

const ACME_TLS = "acme-tls/1";
/** ALPN's wire format (RFC 7301): each protocol name prefixed by its length. */
const ALPN_WIRE = new Uint8Array([ACME_TLS.length, ...new TextEncoder().encode(ACME_TLS)]);

/** The protocol the server chose for a client that offers only acme-tls/1, or the handshake's error. */
function negotiated(port: number): Promise<string | false> {
  return within(
    new Promise((resolve) => {
      const socket = connect({ host: "127.0.0.1", port, servername: "a.burrow.test", ALPNProtocols: [ACME_TLS], rejectUnauthorized: false }, () => {
        resolve(socket.alpnProtocol ?? false);
        socket.destroy();
      });
      socket.on("error", (err) => resolve(`error: ${err.message}`));
    }),
    5_000,
    "TLS handshake",
  );
}

describe("ALPN acme-tls/1 under Bun", () => {
  test("Bun.serve does not negotiate it, though its TLS options list it", async () => {
    const { certPem, keyPem } = await selfSignedCertificate({ names: ["a.burrow.test"] });
    const tls = { cert: certPem, key: keyPem, serverName: "a.burrow.test", ALPNProtocols: ALPN_WIRE };
    using server = Bun.serve({ hostname: "127.0.0.1", port: 0, tls, fetch: () => new Response("hi") });
    const chosen = await negotiated(server.port!);
    expect(chosen === ACME_TLS).toBe(false);
  });

  test("a Bun.listen TLS socket does", async () => {
    const { certPem, keyPem } = await selfSignedCertificate({ names: ["a.burrow.test"] });
    const listener = Bun.listen({ hostname: "127.0.0.1", port: 0, tls: { cert: certPem, key: keyPem, ALPNProtocols: ALPN_WIRE }, socket: { data() {} } });
    try {
      expect(await negotiated(listener.port)).toBe(ACME_TLS);
    } finally {
      listener.stop(true);
    }
  });
});
