/**
 * A throwaway certificate authority installed into the system CA store (Debian's
 * update-ca-certificates, as root), and a server certificate for 127.0.0.1 it signed: a TLS
 * client inside the sandbox then verifies a local test server exactly as it would a real
 * one, through /etc/ssl/certs. `remove()` takes the CA out of the store again.
 */
import { randomBytes } from "node:crypto";
import { readdirSync, readFileSync, readlinkSync, rmSync, writeFileSync } from "node:fs";
import { basename, join } from "node:path";

const STORE_DIR = "/usr/local/share/ca-certificates";
const CERTS_DIR = "/etc/ssl/certs";

export interface TestCa {
  readonly serverCert: string;
  readonly serverKey: string;
  remove(): void;
}

function run(argv: readonly string[], cwd: string): void {
  const r = Bun.spawnSync([...argv], { cwd, stdout: "pipe", stderr: "pipe" });
  if (r.exitCode !== 0) throw new Error(`${argv.join(" ")} failed: ${r.stderr.toString()}`);
}

/**
 * update-ca-certificates leaves the links of a removed certificate behind (NAME.pem, and
 * HASH.0 pointing at it): taken out here, the CA really is gone from the store.
 */
function removeLinksTo(installed: string): void {
  const pem = `${basename(installed, ".crt")}.pem`;
  for (const name of readdirSync(CERTS_DIR)) {
    const path = join(CERTS_DIR, name);
    let target: string;
    try {
      target = readlinkSync(path);
    } catch {
      continue;
    }
    if (name === pem || target === installed || target === pem) rmSync(path, { force: true });
  }
}

/** Needs root (writes the system CA store). `dir`: a temp dir for the keys, removed by the caller. */
export function installTestCa(dir: string): TestCa {
  const subject = (cn: string) => ["-subj", `/CN=${cn}`];
  const quiet = ["-days", "2", "-sha256"];
  run(["openssl", "genrsa", "-out", "ca.key", "2048"], dir);
  run(
    [
      "openssl",
      "req",
      "-x509",
      "-new",
      "-key",
      "ca.key",
      "-out",
      "ca.crt",
      ...quiet,
      ...subject("openai4s test CA"),
      "-addext",
      "basicConstraints=critical,CA:TRUE",
      "-addext",
      "keyUsage=critical,keyCertSign,cRLSign",
    ],
    dir,
  );
  run(
    [
      "openssl",
      "req",
      "-new",
      "-newkey",
      "rsa:2048",
      "-nodes",
      "-keyout",
      "server.key",
      "-out",
      "server.csr",
      ...subject("127.0.0.1"),
    ],
    dir,
  );
  writeFileSync(
    join(dir, "server.ext"),
    "subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n",
  );
  run(
    [
      "openssl",
      "x509",
      "-req",
      "-in",
      "server.csr",
      "-CA",
      "ca.crt",
      "-CAkey",
      "ca.key",
      "-CAcreateserial",
      "-out",
      "server.crt",
      ...quiet,
      "-extfile",
      "server.ext",
    ],
    dir,
  );
  const installed = join(STORE_DIR, `openai4s-test-${randomBytes(6).toString("hex")}.crt`);
  writeFileSync(installed, readFileSync(join(dir, "ca.crt")));
  run(["update-ca-certificates"], dir);
  return {
    serverCert: readFileSync(join(dir, "server.crt"), "utf8"),
    serverKey: readFileSync(join(dir, "server.key"), "utf8"),
    remove() {
      rmSync(installed, { force: true });
      removeLinksTo(installed);
      run(["update-ca-certificates"], "/");
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
