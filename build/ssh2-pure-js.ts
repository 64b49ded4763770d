/**
 * ssh2 (the SSH gateway's library) has two optional native parts: its own
 * crypto binding (ssh2/lib/protocol/crypto/build/Release/sshcrypto.node)
 * and `cpu-features`, which only orders its cipher list. Both are built by
 * npm for Node.js's ABI, which Bun does not load (each require throws, and
 * ssh2 goes on with node:crypto and its WebAssembly Poly1305: the
 * pure-JavaScript path, the one every test runs). In the executable they
 * would be a platform's files carried into every target, and a build would
 * depend on whether npm could compile them; so they are replaced by a
 * module that throws, as their require does under Bun, and ssh2 takes the
 * same path in the executable as in the source.
 */
import type { BunPlugin } from "bun";

export const ssh2PureJsPlugin: BunPlugin = {
  name: "ssh2-pure-js",
  setup(build) {
    build.onResolve({ filter: /^cpu-features$|sshcrypto\.node$/ }, (args) => ({ path: args.path, namespace: "ssh2-native" }));
    build.onLoad({ filter: /.*/, namespace: "ssh2-native" }, () => ({
      contents: `throw new Error("ssh2's native parts are not in this build: it runs on node:crypto");`,
      loader: "js",
    }));
  },
};
