/** Help texts, one per command. */
import { DNS_CHECK_DEFAULTS } from "./server-dns-check-flags.ts";
import { INIT_DEFAULTS } from "./server-init-flags.ts";
import { SERVER_DEFAULTS } from "../config/server.ts";

export const MAIN_HELP = `burrow — self-hosted tunnels to services on your machine

Usage:
  burrow http PORT|HOST:PORT   expose a local HTTP service at http://<name>.<domain>
  burrow tcp PORT|HOST:PORT    expose a local TCP service at <domain>:<port>
  burrow start NAME... | --all start tunnels named in burrow.yml, over one connection
  burrow config check          check burrow.yml without connecting
  burrow login --server URL --token T
                               save the server and token for http, tcp and start
  burrow server [flags]        run the tunnel server (edge + admin API)
  burrow server init --domain D [flags]
                               write a systemd unit for the server, print DNS records and ports
  burrow server backup FILE    write a consistent copy of the server's database to FILE
  burrow server dns-check --domain D
                               check the server's DNS records and its DNS-01 responder
  burrow --help                this text; burrow <command> --help for a command's flags
  burrow version               print the version, commit, build date and target (also --version)

Every server flag may also be set in the environment as BURROW_<FLAG>
(--admin-port -> BURROW_ADMIN_PORT); a flag on the command line wins.
`;

const AGENT_COMMON = `  --server URL            the burrow server, e.g. https://tunnels.example.com
                          (else BURROW_SERVER, else the file burrow login wrote)
  --token T               your device token, brw_... (else BURROW_TOKEN, else that file)
  --proxy URL             reach the server through an http://, https:// or socks5:// proxy
                          (else HTTPS_PROXY / ALL_PROXY)
  --insecure              accept a server certificate that does not verify
  --log F                 screen, text or json (default: screen on a terminal,
                          else text); json is one object per line per event
  --log-level L           debug, info, warn or error: what text and json show
                          (default: info)
  --inspect-addr HOST:PORT
                          where the request inspector listens (default: the
                          first free of 127.0.0.1:4040-4049)
  --inspect-keep N        requests the inspector keeps (default 1000)
  --inspect-memory MIB    bodies the inspector keeps, in all (default 256)
  --no-inspect            no request inspector
  -h, --help              this text`;

export const HTTP_HELP = `Usage: burrow http PORT|HOST:PORT|URL [flags]

Exposes a local HTTP service (e.g. 3000, localhost:3000, https://localhost:8443)
at http://<subdomain>.<server domain>. Lost connections are retried for ever.

Flags:
  --subdomain S           ask for this name (default: a random one)
  --skip-warning          no browser warning page (if your account allows it)
  --host-header H         'rewrite' sends the local address as Host; any other
                          value is sent as is (default: the visitor's Host)
  --response-timeout S    how long the edge waits for your service's answer
                          before its 502 page, up to the server's
                          --max-response-timeout (default: the server's)

Who may reach it (enforced by the server; repeatable flags may be given again):
  --basic-auth USER:PASS  visitors sign in with this user and password
                          (repeatable; or BURROW_BASIC_AUTH)
  --allow-cidr CIDR       only visitors from these addresses (IPv4 or IPv6,
                          repeatable)
  --deny-cidr CIDR        never visitors from these; deny wins (repeatable)
  --request-header-add "Name: value"
                          set this header on requests to your service
  --request-header-remove Name
                          remove this header from requests to your service
  --response-header-add "Name: value"
                          set this header on responses to visitors
  --oidc-issuer URL       visitors sign in with this OpenID Connect provider;
  --oidc-client-id ID     its client id and
  --oidc-client-secret S  secret (or BURROW_OIDC_CLIENT_SECRET); your service
                          gets the visitor's email in X-Burrow-User-Email
  --oidc-allow-email E    only this address, or anyone @domain.com (repeatable)

The server, the output and the request inspector:
${AGENT_COMMON}
`;

export const TCP_HELP = `Usage: burrow tcp PORT|HOST:PORT [flags]

Exposes a local TCP service (e.g. 5432) at <server domain>:<port>.

Flags:
  --remote-port N         ask for this public port (default: any free one)
  --allow-cidr CIDR       only visitors from these addresses (IPv4 or IPv6,
                          repeatable); others are closed at accept
  --deny-cidr CIDR        never visitors from these; deny wins (repeatable)
${AGENT_COMMON}
`;

export const START_HELP = `Usage: burrow start NAME... [flags]
       burrow start --all [flags]

Starts tunnels of a config file, all over one connection to the server.
The file: --config FILE (or BURROW_CONFIG), else ./burrow.yml, else
burrow.yml in burrow's config directory (~/.config/burrow on Linux).

  server: https://tunnels.example.com   # optional; --server and BURROW_SERVER win
  token: brw_...                        # optional; --token and BURROW_TOKEN win
  tunnels:
    web: { proto: http, addr: 3000, subdomain: myapp }
    db:  { proto: tcp, addr: 5432, remote_port: 40000 }

Who may reach a tunnel: basic_auth, allow_cidr, deny_cidr, request_header_add,
request_header_remove, response_header_add (lists, as the flags of burrow http)
and oidc: { issuer, client_id, client_secret, allow_emails }.

A tunnel the server refuses (a subdomain taken, say) is reported by name and
the others run; only when every tunnel is refused does burrow exit 1.
A tunnel with 'inspect: false' is left out of the request inspector.

Flags:
  --all                   start every tunnel of the file
  --config FILE           the config file to read
${AGENT_COMMON}
`;

export const CONFIG_HELP = `Usage: burrow config check [--config FILE]

Checks a burrow.yml (the one burrow start would read) without connecting:
exit 0 with a summary of its tunnels, or exit 2 with FILE:LINE: FIELD: why.
`;

export const LOGIN_HELP = `Usage: burrow login --server URL --token T

Saves the server and token to config.json (mode 0600) in ~/.config/burrow
($XDG_CONFIG_HOME/burrow), ~/Library/Application Support/burrow on macOS or
%APPDATA%\\burrow on Windows, so that burrow http and burrow tcp need neither flag.
`;

const d = SERVER_DEFAULTS;

export const SERVER_HELP = `Usage: burrow server [flags]
       burrow server init --domain D [flags]   set it up as a systemd service (see init --help)
       burrow server backup FILE [--data-dir DIR]   copy its database, running or not (see backup --help)
       burrow server dns-check --domain D   check its DNS records from the server (see dns-check --help)

Flags:
  --domain D              public domain; tunnels are <name>.D        (default ${d.domain})
  --http-port N           public HTTP port for tunnels and agents    (default ${d["http-port"]})
  --admin-port N          admin API port                             (default ${d["admin-port"]})
  --agent-port N          agents' direct port, faster than their WebSocket;
                          0 = any free port, off = none              (default ${d["agent-port"]})
  --host H                address of the public listeners            (default ${d.host})
  --admin-host H          address of the admin API; loopback keeps it
                          off the network                            (default ${d["admin-host"]})
  --data-dir DIR          where burrow.db lives                      (default ${d["data-dir"]})
  --tcp-ports A-B         ports TCP tunnels may take                 (default ${d["tcp-ports"]})
  --system-subdomains L   names nobody may reserve or use            (default ${d["system-subdomains"]})
  --tls-cert FILE         serve the public port over HTTPS with this certificate
  --tls-key FILE          (PEM; a wildcard for *.D and D) and its key
  --response-timeout S    seconds to wait for a local service's answer (default ${d["response-timeout"]})
  --max-response-timeout S  the longest an agent may ask for with
                          burrow http --response-timeout             (default ${d["max-response-timeout"]})
  --idle-timeout S        seconds an idle keep-alive visitor connection stays
                          open; requests in flight are never cut     (default ${d["idle-timeout"]})
  --public-url URL        how visitors reach the public port when a proxy in front
                          changes scheme or port, e.g. https://D (default: derived)
  --max-conns-per-ip N    visitor connections one address may hold   (default ${d["max-conns-per-ip"]})
  --max-conns N           visitor connections in all; auto: from the
                          open-file limit                            (default ${d["max-conns"]})
  --max-agents-per-ip N   agent connections one address may hold     (default ${d["max-agents-per-ip"]})
  --trusted-proxies L     proxies (addresses, CIDRs) whose X-Forwarded-For
                          names the client for caps and throttles
  --drain-timeout S       on SIGTERM, how long requests in flight may
                          take to finish                             (default ${d["drain-timeout"]})
  --handshake-limit N     failed agent handshakes one address may make
                          a minute before RATE_LIMITED               (default ${d["handshake-limit"]})
  --audit-days N          days the audit log keeps an entry; older ones
                          are deleted at start and daily             (default ${d["audit-days"]})
  --log-format F          text, or json: one JSON object a line    (default ${d["log-format"]})
  --metrics-token T       bearer token Prometheus scrapes GET /metrics with
                          on the admin port (16+ characters; prefer
                          BURROW_METRICS_TOKEN); without it: admins only
  --oidc-http-issuers M   off, or loopback: tunnels may use a plain-http
                          OIDC issuer on loopback                    (default ${d["oidc-http-issuers"]})
  --basic-auth-limit N    wrong basic-auth passwords one address may try
                          on a tunnel before a lock (1 min, doubling) (default ${d["basic-auth-limit"]})
  --database URL          PostgreSQL instead of SQLite in the data dir:
                          postgres://user:password@host:5432/db (prefer
                          BURROW_DATABASE_URL: a flag shows in ps)

Several nodes on one PostgreSQL database (with --database):
  --node-id ID            this node among the others      (default: the host name)
  --node-url URL          where the other nodes reach this one's public
                          port, e.g. http://10.0.0.2:8080; with it they
                          relay visitors to its tunnels
  --cluster-secret S      shared by the nodes, 16+ characters (prefer
                          BURROW_CLUSTER_SECRET); needed with --node-url
  --node-expiry SECONDS   a node silent this long is dead and its names
                          free; the same on every node, 3 to 3600 (default ${d["node-expiry"]})
  --relay-lookups N       other nodes' names looked up at once; past it
                          a visitor gets 503                          (default ${d["relay-lookups"]})
  --db-pool N             connections to PostgreSQL, 4 to 1000        (default ${d["db-pool"]})

HTTPS from an ACME CA (Let's Encrypt unless told otherwise):
  --acme-email ADDR       get and renew certificates; the edge serves HTTPS on
                          --https-port, and --http-port answers the CA and
                          redirects to HTTPS (--tls-cert files win over this)
  --https-port N          the HTTPS port with --acme-email              (default ${d["https-port"]})
  --dns-port N            UDP+TCP port answering the wildcard's DNS-01 for
                          _acme-challenge.D; off: a certificate per reserved
                          or live name by HTTP-01 instead            (default ${d["dns-port"]})
  --acme-directory URL    the CA's ACME directory                    (default Let's Encrypt)
  --acme-ca-root FILE     trust this CA for the directory's HTTPS (a test CA)
  --acme-names-per-week N certificates made on demand for single names a week,
                          at most                                    (default ${d["acme-names-per-week"]})
  --acme-retry-min S      first wait after a failed attempt, doubling to an
                          hour; least time between two issuances     (default ${d["acme-retry-min"]})
  --dns-rate N            DNS answers a second to one client (bursts of 2N) (default ${d["dns-rate"]})
  --dns-total-rate N      DNS answers a second to all clients        (default ${d["dns-total-rate"]})
  -h, --help              this text

Environment:
  BURROW_<FLAG>           any flag above, e.g. BURROW_ADMIN_PORT=4041
  BURROW_ADMIN_USERNAME   first admin's name when the database has no admin (default admin)
  BURROW_ADMIN_PASSWORD   first admin's password; when unset one is generated and printed once
  BURROW_METRICS_TOKEN    the --metrics-token, kept out of the process list
`;

export const SERVER_INIT_HELP = `Usage: burrow server init --domain D [server flags] [flags]

Writes a systemd unit that runs 'burrow server' with the server flags given
(sandboxed, as a user systemd makes up, data in /var/lib/burrow), and an
environment file with a generated password for the first admin, shown once.
Then prints the DNS records to create, the ports to open and what to run.
The server flags are those of burrow server --help, checked the same way;
BURROW_<FLAG> variables are not read (the service does not see them).

Flags:
  --domain D              public domain; tunnels are <name>.D (required)
  --unit-file PATH        the unit to write        (default ${INIT_DEFAULTS["unit-file"]})
  --env-file PATH         the environment file, mode 0600; kept as it is
                          when it exists           (default ${INIT_DEFAULTS["env-file"]})
  --binary PATH           the burrow the unit runs (default: this executable;
                          run from source, ${INIT_DEFAULTS.binary})
  --data-dir DIR          below /var/lib, the service's state directory
                                                   (default ${INIT_DEFAULTS["data-dir"]})
  --public-ip IP          the server's public address for the DNS records, IPv4 or
                          IPv6; repeat it or give a comma list (default: guessed
                          from this machine's interfaces)
  --force                 replace an existing unit (the environment file never is)
  --print                 show the unit, the environment file (password masked)
                          and the DNS records; write nothing
  -h, --help              this text
`;

export const SERVER_BACKUP_HELP = `Usage: burrow server backup FILE [--data-dir DIR]

Writes a consistent copy of DIR/burrow.db to FILE, whether a server is running
on DIR or not: the copy is a snapshot of one moment (SQLite's VACUUM INTO),
made without stopping anything. FILE must not exist: nothing is overwritten.
The copy appears under its name only once whole.

To restore: stop the server, copy FILE to DIR/burrow.db, remove
DIR/burrow.db-wal and DIR/burrow.db-shm, start the server.

Flags:
  --data-dir DIR          the server's data dir (else BURROW_DATA_DIR) (default ${d["data-dir"]})
  -h, --help              this text
`;

export const SERVER_DNS_CHECK_HELP = `Usage: burrow server dns-check --domain D [flags]

Run on the server, checks the DNS records burrow server init asks for, and
says what is wrong: D and a random name under *.D resolve to this server;
_acme-challenge.D is delegated (NS) to a name that resolves to this server;
burrow's DNS answers there for that zone, over UDP and TCP; and a TXT lookup
of _acme-challenge.D through the resolver gets NOERROR, as the CA's will.
Each check prints one line: ok, FAIL (with what to do) or warn.
Exit code 0 when nothing failed (warnings included), 1 otherwise.

Flags:
  --domain D              the server's domain (required)
  --public-ip IP          this server's public address, IPv4 or IPv6; repeat it
                          or give a comma list (default: guessed from this
                          machine's interfaces)
  --resolver HOST:PORT    the resolver to look names up with (default: the
                          system's, e.g. from /etc/resolv.conf)
  --dns-port N            where burrow's DNS listens (--dns-port of the server)
                                                   (default ${DNS_CHECK_DEFAULTS["dns-port"]})
  --timeout S             seconds to wait for each answer (default ${DNS_CHECK_DEFAULTS.timeout})
  -h, --help              this text
`;
