/**
 * The part of the `ssh2` package (mscdex/ssh2, 1.x) burrow uses, typed
 * here rather than with another dependency: its server, the connections
 * and channels it makes, and its key parser. What is declared is what the
 * gateway (ssh/) and the key reader (core/ssh-public-key.ts) call; the
 * package has more.
 */
declare module "ssh2" {
  import type { EventEmitter } from "node:events";
  import type { Duplex, Writable } from "node:stream";
  import type { Socket } from "node:net";

  export interface ParsedKey {
    readonly type: string;
    readonly comment: string;
    isPrivateKey(): boolean;
    getPrivatePEM(): string | null;
    getPublicPEM(): string;
    getPublicSSH(): Buffer;
    sign(data: Buffer | Uint8Array, algo?: string): Buffer | Error;
    verify(data: Buffer | Uint8Array, signature: Buffer | Uint8Array, algo?: string): boolean | Error;
  }

  export const utils: {
    parseKey(data: string | Buffer, passphrase?: string): ParsedKey | ParsedKey[] | Error;
    generateKeyPairSync(type: "ed25519" | "rsa" | "ecdsa", opts?: { bits?: number; comment?: string }): { private: string; public: string };
  };

  export interface Algorithms {
    kex?: string[];
    cipher?: string[];
    serverHostKey?: string[];
    hmac?: string[];
    compress?: string[];
  }

  export interface ServerConfig {
    hostKeys: (string | Buffer)[];
    /** The software part of the version line: "SSH-2.0-<ident>". */
    ident?: string;
    algorithms?: Algorithms;
    keepaliveInterval?: number;
    keepaliveCountMax?: number;
    debug?: (message: string) => void;
  }

  export interface ClientInfo {
    ip: string;
    family: string;
    port: number;
    header: { identRaw: string; versions: { protocol: string; software: string }; comments?: string };
  }

  export interface AuthContextBase extends EventEmitter {
    readonly username: string;
    readonly service: string;
    accept(): void;
    reject(methodsLeft?: string[], isPartial?: boolean): void;
  }
  export interface PublicKeyAuthContext extends AuthContextBase {
    readonly method: "publickey";
    readonly key: { algo: string; data: Buffer };
    readonly hashAlgo?: string;
    readonly signature?: Buffer;
    readonly blob?: Buffer;
  }
  export interface OtherAuthContext extends AuthContextBase {
    readonly method: "none" | "password" | "keyboard-interactive" | "hostbased";
  }
  export type AuthContext = PublicKeyAuthContext | OtherAuthContext;

  export interface ServerChannel extends Duplex {
    readonly stderr: Writable;
    readonly incoming: { id: number; window: number; packetSize: number; state: string };
    readonly outgoing: { id: number; window: number; packetSize: number; state: string };
    exit(status: number): void;
    /** EOF alone: nothing more from this side. */
    eof(): void;
    close(): void;
  }

  export type Accept<T = void> = () => T;
  export type Reject = () => void;

  export interface Session extends EventEmitter {
    on(event: "pty", listener: (accept: Accept | undefined, reject: Reject | undefined, info: { cols: number; rows: number; term: string }) => void): this;
    on(event: "window-change", listener: (accept: Accept | undefined, reject: Reject | undefined, info: unknown) => void): this;
    on(event: "env", listener: (accept: Accept | undefined, reject: Reject | undefined, info: { key: string; val: string }) => void): this;
    on(event: "shell", listener: (accept: Accept<ServerChannel>, reject: Reject) => void): this;
    on(event: "exec", listener: (accept: Accept<ServerChannel>, reject: Reject, info: { command: string }) => void): this;
    on(event: "signal" | "auth-agent" | "x11" | "sftp" | "subsystem", listener: (accept: Accept | undefined, reject: Reject | undefined, info?: unknown) => void): this;
    on(event: "close" | "end" | "eof", listener: () => void): this;
  }

  export interface TcpipRequestInfo {
    destIP: string;
    destPort: number;
    srcIP: string;
    srcPort: number;
  }

  /** A client's connection, as the server sees it. */
  export interface Connection extends EventEmitter {
    readonly authenticated: boolean;
    noMoreSessions: boolean;
    on(event: "authentication", listener: (ctx: AuthContext) => void): this;
    on(event: "ready" | "close" | "end" | "rekey", listener: () => void): this;
    on(event: "error", listener: (err: Error & { level?: string }) => void): this;
    on(event: "handshake", listener: (negotiated: unknown) => void): this;
    on(event: "session", listener: (accept: Accept<Session>, reject: Reject) => void): this;
    on(event: "tcpip", listener: (accept: Accept<ServerChannel>, reject: Reject, info: TcpipRequestInfo) => void): this;
    on(event: "openssh.streamlocal", listener: (accept: Accept<ServerChannel>, reject: Reject, info: unknown) => void): this;
    on(
      event: "request",
      listener: (accept: ((port?: number) => void) | undefined, reject: (() => void) | undefined, name: string, info: { bindAddr: string; bindPort: number; socketPath?: string }) => void,
    ): this;
    forwardOut(boundAddr: string, boundPort: number, remoteAddr: string, remotePort: number, callback: (err: Error | undefined, channel: ServerChannel) => void): this;
    end(): this;
    setNoDelay(noDelay?: boolean): this;
  }

  export class Server extends EventEmitter {
    constructor(config: ServerConfig, listener?: (client: Connection, info: ClientInfo) => void);
    injectSocket(socket: Socket): void;
    listen(port: number, host: string, callback?: () => void): this;
    address(): { address: string; port: number } | string | null;
    close(callback?: () => void): this;
    maxConnections: number;
  }
}

declare module "ssh2/lib/protocol/utils.js" {
  const utils: {
    /** Encrypts and writes `packet` on `proto` (during a key exchange, queued unless `bypass`). */
    sendPacket(proto: unknown, packet: Buffer, bypass?: boolean): boolean;
  };
  export default utils;
}

declare module "ssh2" {
  import type { EventEmitter } from "node:events";
  import type { Duplex, Readable } from "node:stream";

  /** A channel as the client sees it (tests drive ssh2's client as a hostile peer). */
  export interface ClientChannel extends Duplex {
    readonly stderr: Readable;
    close(): void;
  }

  export interface ConnectConfig {
    host: string;
    port: number;
    username: string;
    privateKey?: Buffer | string;
    hostVerifier?: (key: Buffer) => boolean;
    agent?: string;
    agentForward?: boolean;
  }

  export class Client extends EventEmitter {
    connect(config: ConnectConfig): this;
    end(): this;
    exec(command: string, callback: (err: Error | undefined, channel: ClientChannel) => void): this;
    exec(command: string, options: { x11?: boolean; agentForward?: boolean; pty?: boolean }, callback: (err: Error | undefined, channel: ClientChannel) => void): this;
    shell(callback: (err: Error | undefined, channel: ClientChannel) => void): this;
    subsys(name: string, callback: (err: Error | undefined, channel: ClientChannel) => void): this;
    sftp(callback: (err: Error | undefined, sftp: unknown) => void): this;
    forwardIn(bindAddr: string, bindPort: number, callback: (err: Error | undefined, port: number) => void): this;
    forwardOut(srcIP: string, srcPort: number, dstIP: string, dstPort: number, callback: (err: Error | undefined, channel: ClientChannel) => void): this;
    openssh_forwardInStreamLocal(socketPath: string, callback: (err: Error | undefined) => void): this;
    openssh_forwardOutStreamLocal(socketPath: string, callback: (err: Error | undefined, channel: ClientChannel) => void): this;
    on(event: "tcp connection", listener: (info: { destIP: string; destPort: number; srcIP: string; srcPort: number }, accept: () => ClientChannel, reject: () => void) => void): this;
    on(event: string, listener: (...args: any[]) => void): this;
  }
}
