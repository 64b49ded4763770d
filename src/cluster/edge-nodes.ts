/**
 * The edge's view of the other nodes (edge/other-nodes.ts), made of the
 * cluster's shared registry (cluster.ts) and, with a cluster secret, the
 * relay between nodes: links out to the nodes that hold a visitor's tunnel
 * (relay.ts RelayOut, found by remote-tunnels.ts) and links in from the
 * nodes that relay to this one (RelayIn).
 */
import { log } from "../log.ts";
import type { NodeLink, NodeLinks, NodeTransport, OtherNodes } from "../edge/other-nodes.ts";
import type { Registry } from "../edge/registry.ts";
import type { Cluster } from "./cluster.ts";
import { verifyNodeAuthorization } from "./node-auth.ts";
import { RelayIn, RelayOut } from "./relay.ts";
import { RemoteTunnels } from "./remote-tunnels.ts";

export interface EdgeNodesOptions {
  /** --cluster-secret: the nodes relay visitors to each other; without it each serves only its own tunnels. */
  secret?: string;
  /** --relay-lookups: other nodes' names looked up at once. */
  relayLookups?: number;
}

export function edgeNodes(cluster: Cluster, opts: EdgeNodesOptions): OtherNodes {
  const out = opts.secret ? new RelayOut(cluster.nodeId, opts.secret) : undefined;
  let registry: Registry | undefined;
  let remote: RemoteTunnels | undefined;
  const links: NodeLinks | undefined = opts.secret
    ? {
        acceptNode: (req) => verifyNodeAuthorization(req.headers.get("authorization"), opts.secret!),
        linked(nodeId: string, transport: NodeTransport): NodeLink {
          const link = new RelayIn(nodeId, transport.send, transport.close, registry!);
          log.info("relay link from another node", { node: nodeId });
          return { receive: (frames) => link.mux.receive(frames), drained: () => link.mux.drained(), closed: () => link.mux.close() };
        },
      }
    : undefined;
  return {
    live: cluster,
    attach(r, domain) {
      registry = r;
      cluster.attach(r);
      // without a secret a name on another node is still found, to say why it cannot be reached
      remote = new RemoteTunnels(cluster.names, out, r, domain, opts.relayLookups);
      cluster.onPoolChanged = (name) => remote?.forget(name);
    },
    holdAtStart: (t) => cluster.names.holdAtStart(t),
    oneUserAtATime: (userId, fn) => cluster.oneUserAtATime(userId, fn),
    claim: (subdomain, owner, sessionId, resume, serving) => cluster.names.claim(subdomain, owner, sessionId, resume, serving),
    release: (subdomain) => cluster.names.release(subdomain),
    joinPool: (names, memberId, owner, sessionId, serving) => cluster.pools.joinPool(names, memberId, owner, sessionId, serving),
    dropMember: (memberId) => cluster.pools.dropMember(memberId),
    registerRow: (t, sessionId) => cluster.names.registerRow(t, sessionId),
    find: (name) => remote?.find(name),
    async privateElsewhere(ownerId, name) {
      const found = await cluster.names.privateElsewhere(ownerId, name);
      if (!found?.nodeUrl || !out || !registry) return undefined;
      const link = await out.link(found.nodeId, found.nodeUrl);
      if (!link) return undefined;
      const standIn = registry.newTunnel(found.protocol, { private: name }, found, false);
      standIn.relayed = true;
      standIn.agent = out.agentFor(link, found);
      return standIn;
    },
    poolOthers: (name) => remote?.poolOthers(name) ?? [],
    links,
    close: () => out?.close(),
  };
}
