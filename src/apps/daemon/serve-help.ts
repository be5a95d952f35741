/**
 * The text of `openai4s serve --help`, around the list of backends (the composition's
 * list of backends names them). Kept apart from the flag parsing: it is a page of prose, not code.
 */
import { BACKENDS, DEFAULT_BACKEND } from "./composition/backends.ts";

/** The help page, with the listed backends and the default named. */
export function serveHelp(): string {
  const backends = BACKENDS.map(
    (b) => `                          ${b.name.padEnd(8)} ${b.describe}`,
  ).join("\n");
  return `${HEAD}  --backend NAME          Where work runs (default ${DEFAULT_BACKEND}):\n${backends}\n${TAIL}`;
}

const HEAD = `Usage: openai4s serve [options]

Run the daemon: the admin API, the reconciler and (opt-in) the worker gateway.

Options:
  --state-dir DIR         Private state directory (else $OPENAI4S_STATE_DIR, else
                          $XDG_STATE_HOME/openai4s, else ~/.local/state/openai4s).
                          Created 0700; holds the database, signing key, admin token,
                          API socket, lock and job records. Keep it on local disk. The
                          daemon refuses to start (exit 2) when it, or anything in it,
                          belongs to another user, when group or other may write it,
                          or when a parent directory lets another user replace it
                          (sticky dirs such as /tmp are fine).
  --spool-dir DIR         Where jobs run: workspaces, job logs, credential files
                          (else $OPENAI4S_SPOOL_DIR, else STATE_DIR-spool beside the
                          state dir). Must not contain or be inside the state dir;
                          refused (exit 2) like the state dir when a parent lets
                          another user replace it. Required for a cluster backend:
                          a dir the nodes share.
  --spool-low-water SIZE  Below this much free space in the spool (e.g. 2G, 500M),
                          new submissions get 503 SPOOL_FULL and diagnostics say the
                          spool is unhealthy, until space returns. Default: 5% of its
                          filesystem, at most 1G; 0 turns the check off.
  --state-low-water SIZE  The same for the state dir (the store, the job records):
                          below it new submissions get 503 STATE_DIR_FULL and
                          /healthz says degraded. Default: 5% of its filesystem, at
                          most 256M; 0 turns the check off.
  --allow-network-db      Open the database even when the state dir is not on a
                          filesystem known to be local (ext2/3/4, xfs, btrfs, tmpfs,
                          zfs, f2fs, or an overlay of those); refused otherwise (NFS,
                          Lustre, CIFS, fuse.*, virtiofs...), because SQLite's WAL
                          locking does not work across hosts.
  --listen ADDR           unix:PATH or HOST:PORT; repeatable. Adds a listener beside the
                          API socket STATE_DIR/api.sock (mode 0600), which is always
                          served: the CLI and backup keep working on it. TCP listeners
                          require Authorization: Bearer TOKEN with the token in
                          STATE_DIR/admin-token (GET /healthz excepted: liveness only).
  --body-timeout-ms MS    How long any listener waits for a request's body before it
                          answers 408 and closes the connection (default 30000); for a
                          file upload, the longest pause between its chunks.
  --max-upload-size SIZE  The largest file \`PUT /v1/workloads/ID/files/PATH\` (and
                          \`openai4s cp\`) accepts, e.g. 500M or 64G (default 16G).
  --allow-remote          Allow a --listen address that is not loopback.
  --tls-cert FILE         TLS on every TCP --listen: the certificate (PEM, the chain
                          after it) ...
  --tls-key FILE          ... and its private key (PEM, mode 600). Both or neither;
                          without them a TCP listener speaks plain HTTP, tokens in clear.
`;

const TAIL = `  --cluster-config FILE   The cluster.toml a cluster backend reads its profiles from.
  --uid-range FIRST-LAST  When the daemon runs as root (the default there): each workload's
                          jobs, session worker and steps run as a uid of their own from this
                          range, gid alike, with no capabilities and no_new_privs; its
                          workspace (0700) is owned by it. No passwd entry is needed. A uid is
                          not leased again while a workspace it owns is still in the spool.
                          Else $OPENAI4S_UID_RANGE, else 61184-65519 (systemd's DynamicUser
                          block); 65534, 65535 and ids named in /etc/passwd or
                          /etc/group are never used.
  --run-as USER|UID[:GID] Instead of --uid-range (else $OPENAI4S_RUN_AS): one named account
                          for every job. Jobs are then kept apart by the sandbox's namespaces
                          alone. Refused if it resolves to uid 0. A daemon that is not root
                          runs jobs as its own uid, sandboxed in a user namespace (neither
                          flag then).
  --allow-unsandboxed-batch
                          Run BATCH jobs even when they would run as this daemon's own
                          uid with no verified sandbox (a daemon that is not root, where
                          bubblewrap cannot run): such a job can read the state dir,
                          database and admin token. Refused otherwise (409
                          ISOLATION_UNAVAILABLE). Logged at every start, shown in
                          /v1/diagnostics and /metrics.
  --principal-max-sessions N, --principal-max-batch N, --principal-max-cpus N,
  --principal-max-gpus N  Limits a principal gets when \`principal add\` names none (else
                          $OPENAI4S_PRINCIPAL_MAX_SESSIONS and alike; default: none).
                          Applied when the principal is added; the admin is unlimited.
  --oidc-issuer URL       Accept JWTs from the site's OIDC issuer as bearer tokens (https;
                          http only on loopback). Keys from its discovery document's
                          jwks_uri, reloaded on an unknown kid at most every 30 s. A
                          person's first valid token makes their principal (these limits),
                          mapped to the unix account the claim names. Needs:
  --oidc-audience AUD     The client id tokens must be issued for (aud).
  --oidc-user-claim NAME  The claim that names the unix account (preferred_username).
  --oidc-jwks-file FILE, --oidc-jwks-uri URL
                          The issuer's keys from a file (no outbound access; re-read on an
                          unknown kid) or this URL, instead of discovery.
                          Each --oidc-* flag may be given as $OPENAI4S_OIDC_* instead.
  --munge                 Accept MUNGE credentials (Authorization: MUNGE CRED) bound to the
                          request and this daemon; the uid's principal is the caller, root and
                          this daemon's own user are the admin. --munge-socket PATH names
                          munged's socket; --munge-create-principals makes a principal for an
                          account that has none (else 403 naming \`principal add\`).
  --users-socket PATH     A second socket, mode 0666, for every local user: nothing is
                          granted by its mode, each request proves its caller (MUNGE, a
                          token). The admin's socket in the state dir stays 0600.
  --log-level LEVEL       debug, info (default), warn or error. Logs are JSON lines on stderr.
  --poll-min-ms MS        Shortest time between two observations of the backend, however
                          often the API wakes the reconciler (default 1000).
  --poll-max-ms MS        While nothing changes the period doubles up to this (default 30000).
  --max-commands N        Submit/cancel commands in flight at most (default 4, at least 2).
  -h, --help              Show this help.

Environment:
  OPENAI4S_WORKER_LISTEN=HOST:PORT   Open the worker gateway (sessions); off when unset.
  OPENAI4S_RUN_AS=USER|UID[:GID]     As --run-as.
  OPENAI4S_UID_RANGE=FIRST-LAST      As --uid-range.
  OPENAI4S_SPOOL_DIR=DIR             The spool, when --spool-dir is not given.
  OPENAI4S_WORKER_TLS=off            The worker gateway without TLS (default: TLS, with a
                                     certificate generated into the state dir).
  OPENAI4S_WORKER_TLS_KEY=FILE, OPENAI4S_WORKER_TLS_CERT=FILE
                                     The admin's key (mode 600) and certificate instead.
  OPENAI4S_INTERRUPT_GRACE_MS=N      An interrupted cell still running N ms later costs its
                                     kernel: restarted, state lost (10000).
  OPENAI4S_WARN_MINUTES_BEFORE_LIMIT=N
                                     Local backend: a job's TIME_LIMIT_NEAR event and its
                                     SIGURG come N minutes before its time limit (5; 0: none;
                                     a cluster profile sets warn_minutes_before_limit instead).
  OPENAI4S_LOCAL_MEMORY_MB=N         Local backend: memory per job (default: 3/4 of this
                                     machine's); past it a job ends FAILED/OUT_OF_MEMORY.
  OPENAI4S_LOCAL_PIDS_MAX=N          Local backend: processes per job at once (4096).
  OPENAI4S_LOCAL_NETWORK=host|none   Local backend: none gives each job its own network
                                     namespace, loopback only (needs the sandbox).
  OPENAI4S_LOCAL_PROFILES=FILE       Local backend: its profiles from a [profiles.NAME] file
                                     (docs/operations.md) instead of the one default; the
                                     four knobs above are then each profile's defaults, and
                                     a profile without a network key gets none.
  OPENAI4S_CGROUP_ROOT=PATH|off      Local backend: where job cgroups go, as a path inside
                                     the cgroup hierarchy (a subtree delegated to a daemon
                                     that is not root); off: rlimits only. Default: below
                                     the daemon's own cgroup (v1), /openai4s (v2).
  A bad value stops the start (exit 2) naming every such variable at once; an empty value
  is the same as unset.

A state dir of the old single-directory layout (workloads/ inside it) is migrated at
start: workspaces and logs move to the spool by rename, running jobs keep running.

SIGTERM or SIGINT stops accepting requests, lets the current reconciler tick finish,
closes the database and removes the socket; exit status 0.
Exit codes: 0 stopped cleanly, 1 could not start or run, 2 usage or configuration error.
`;
