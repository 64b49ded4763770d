/**
 * TLS-ALPN-01 (RFC 8737): the CA connects to port 443 of the name, offering
 * only the ALPN protocol `acme-tls/1`, and expects a self-signed
 * certificate for that name carrying the key authorization's SHA-256 in the
 * critical acmeIdentifier extension; no HTTP follows. For a server whose
 * port 80 is closed (`--acme-challenge tls-alpn-01`).
 *
 * The public port reads each ClientHello itself (sockets/tls-front.ts): a
 * hello that offers `acme-tls/1` for a name with an answer in flight is
 * handed, undecrypted, to a TLS listener of its own on 127.0.0.1 that holds
 * the challenge certificate and speaks only `acme-tls/1`; it ends the
 * connection once the handshake is done. Every other hello goes on as ever,
 * so a visitor never meets a challenge certificate.
 *
 * Answers are bounded in number and expire on their own (an issuance that
 * died before its cleanup leaves nothing served for ever).
 */
import type { Socket, TCPSocketListener } from "bun";
import * as x509 from "@peculiar/x509";
import type { Passthrough } from "../sockets/tls-visit.ts";
import type { ClientHello } from "../tls/client-hello.ts";
import type { ChallengeSolver } from "./solver.ts";

export const ACME_TLS_ALPN = "acme-tls/1";
/** The protocol list in its wire form (RFC 7301: each name after its length), as Bun's TLS options take it. */
const ALPN_WIRE = new Uint8Array([ACME_TLS_ALPN.length, ...new TextEncoder().encode(ACME_TLS_ALPN)]);
/** Long enough for any validation; the CA gives up on a challenge well before. */
export const TLS_ALPN_TTL_MS = 10 * 60 * 1000;
/** Answers in flight at once, at most. */
export const MAX_TLS_ALPN_ANSWERS = 64;
/** What a validating connection may send before its listener has taken it: a ClientHello and a little more. */
const MAX_PENDING_BYTES = 64 * 1024;

interface Answer {
  /** Which key authorization it answers (a newer one for the name replaces it). */
  keyAuthorization: string;
  listener: TCPSocketListener<undefined>;
  expires: number;
}

export class TlsAlpnAnswers {
  private readonly answers = new Map<string, Answer>();

  constructor(private readonly now: () => number = Date.now) {}

  /** Serves the challenge certificate for `name` (lowercased); throws a sentence when too many are in flight. */
  async add(name: string, keyAuthorization: string): Promise<void> {
    const key = name.toLowerCase();
    this.prune();
    const held = this.answers.get(key);
    if (held?.keyAuthorization === keyAuthorization) return void (held.expires = this.now() + TLS_ALPN_TTL_MS);
    if (!held && this.answers.size >= MAX_TLS_ALPN_ANSWERS) throw new Error(`${MAX_TLS_ALPN_ANSWERS} TLS-ALPN-01 challenges are in flight already`);
    const { cert, key: keyPem } = await challengeCertificate(key, keyAuthorization);
    const listener = Bun.listen<undefined>({
      hostname: "127.0.0.1",
      port: 0,
      tls: { cert, key: keyPem, ALPNProtocols: ALPN_WIRE },
      socket: {
        // the CA has what it came for once the handshake is done: nothing else is served here
        handshake: (socket) => void socket.end(),
        data() {},
      },
    });
    this.answers.get(key)?.listener.stop(true);
    this.answers.set(key, { keyAuthorization, listener, expires: this.now() + TLS_ALPN_TTL_MS });
  }

  remove(name: string): void {
    const key = name.toLowerCase();
    this.answers.get(key)?.listener.stop(true);
    this.answers.delete(key);
  }

  get size(): number {
    this.prune();
    return this.answers.size;
  }

  /** The way to the challenge certificate for a hello that asks for it, or undefined for any other hello. */
  route(hello: ClientHello): Passthrough | undefined {
    if (this.answers.size === 0 || !hello.alpn?.includes(ACME_TLS_ALPN) || hello.serverName === undefined) return undefined;
    const answer = this.answers.get(hello.serverName.toLowerCase());
    if (!answer) return undefined;
    if (answer.expires <= this.now()) return void this.remove(hello.serverName);
    return pipeTo(answer.listener.port);
  }

  /** Stops every answer's listener (the server stops). */
  clear(): void {
    for (const name of [...this.answers.keys()]) this.remove(name);
  }

  private prune(): void {
    const now = this.now();
    for (const [name, answer] of this.answers) if (answer.expires <= now) this.remove(name);
  }
}

/** RFC 8737 3: the id-pe-acmeIdentifier extension's OID. */
const ACME_IDENTIFIER_OID = "1.3.6.1.5.5.7.1.31";
const ALG = { name: "ECDSA", namedCurve: "P-256", hash: "SHA-256" } as const;

/**
 * The self-signed certificate RFC 8737 asks for: the one name in its
 * subjectAltName, and the key authorization's SHA-256 in the critical
 * acmeIdentifier extension (an ASN.1 OCTET STRING of 32 bytes). Its key
 * usage is digitalSignature: a TLS stack refuses to serve an ECDSA
 * certificate marked for certificate signing only.
 */
async function challengeCertificate(name: string, keyAuthorization: string): Promise<{ cert: string; key: string }> {
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(keyAuthorization)));
  const keys = (await crypto.subtle.generateKey(ALG, true, ["sign", "verify"])) as CryptoKeyPair;
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: Buffer.from(crypto.getRandomValues(new Uint8Array(8))).toString("hex"),
    name: `CN=${name}`,
    notBefore: new Date(Date.now() - 60_000),
    notAfter: new Date(Date.now() + 24 * 3600 * 1000),
    keys,
    signingAlgorithm: ALG,
    extensions: [
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
      new x509.SubjectAlternativeNameExtension([{ type: "dns", value: name }]),
      new x509.Extension(ACME_IDENTIFIER_OID, true, new Uint8Array([0x04, digest.length, ...digest])),
    ],
  });
  const pkcs8 = await crypto.subtle.exportKey("pkcs8", keys.privateKey);
  return { cert: cert.toString("pem") + "\n", key: x509.PemConverter.encode(pkcs8, "PRIVATE KEY") + "\n" };
}

/** A visitor's connection piped, bytes as they are, to a listener on 127.0.0.1. */
function pipeTo(port: number): Passthrough {
  const upstreams = new WeakMap<Socket<unknown>, { socket?: Socket<undefined>; pending: Uint8Array[]; pendingBytes: number; closed: boolean }>();
  const send = (visitor: Socket<unknown>, bytes: Uint8Array) => {
    const up = upstreams.get(visitor);
    if (!up || up.closed) return;
    if (up.socket) return void up.socket.write(bytes);
    up.pendingBytes += bytes.byteLength;
    if (up.pendingBytes > MAX_PENDING_BYTES) return void visitor.end();
    up.pending.push(bytes.slice());
  };
  return {
    open(visitor, firstBytes) {
      const up: { socket?: Socket<undefined>; pending: Uint8Array[]; pendingBytes: number; closed: boolean } = { pending: [], pendingBytes: 0, closed: false };
      upstreams.set(visitor, up);
      send(visitor, firstBytes);
      Bun.connect<undefined>({
        hostname: "127.0.0.1",
        port,
        socket: {
          open(socket) {
            if (up.closed) return void socket.end();
            up.socket = socket;
            for (const chunk of up.pending.splice(0)) socket.write(chunk);
          },
          data: (_socket, chunk) => void visitor.write(chunk),
          end: () => void visitor.end(),
          close: () => void visitor.end(),
          error: () => void visitor.end(),
        },
      }).catch(() => visitor.end());
    },
    data: (visitor, chunk) => send(visitor, chunk),
    end(visitor) {
      upstreams.get(visitor)?.socket?.end();
    },
    close(visitor) {
      const up = upstreams.get(visitor);
      if (!up) return;
      up.closed = true;
      up.socket?.end();
    },
  };
}

/** Answers TLS-ALPN-01 challenges on the public HTTPS port (RFC 8737). */
export function tlsAlpn01Solver(answers: TlsAlpnAnswers): ChallengeSolver {
  return {
    type: "tls-alpn-01",
    prepare: (authz, _challenge, keyAuthorization) => answers.add(authz.identifier.value, keyAuthorization),
    cleanup: (authz) => answers.remove(authz.identifier.value),
  };
}
