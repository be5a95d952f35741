/**
 * Which environment variable names may be given to a job. One rule for every backend,
 * enforced at admission (the API answers 400 naming the key and why) and again at a
 * backend's own boundary (the scheduler broker), with the same function.
 *
 * Two families are refused:
 *  - credential-shaped names: a secret travels as the path to a 0600 file, never as a value
 *    in a job's environment, where a scheduler prints it to anyone who asks about the job and
 *    /proc shows it to every process of the uid;
 *  - loader- and shell-hijack names: variables that make a program run code of the caller's
 *    choosing before (or instead of) its own, e.g. `LD_PRELOAD` naming a library an earlier
 *    job wrote into its workspace. Every launch passes through helper programs the daemon
 *    chose (the sandbox, the privilege drop, `env`, the worker and its kernel); a job's own
 *    code may do as it likes inside its sandbox, but it must not get to run inside those.
 *    Measured: `{"LD_PRELOAD": ...}` once ran a library's constructor as root in the
 *    host-side sandbox process, which read the signing key and the admin token.
 */

/**
 * Credential-shaped names. Deliberately broad: a false positive costs a renamed variable, a
 * false negative puts a secret where others can read it.
 */
export const CREDENTIAL_ENV_NAME_PATTERN =
  /TOKEN|SECRET|PASSWORD|PASSWD|PASSPHRASE|KEY|CREDENTIAL|CREDS|PRIVATE|AUTH|COOKIE|SIGNATURE|SESSIONID/i;

function isCredentialShapedEnvName(name: string): boolean {
  return CREDENTIAL_ENV_NAME_PATTERN.test(name);
}

const CREDENTIAL_ENV_NAME_MESSAGE =
  "looks like a credential: pass the path to a 0600 file instead of the secret itself";

/** Prefixes whose every member is read by a loader or runtime before the program runs. */
const HIJACK_PREFIXES: readonly (readonly [RegExp, string])[] = [
  [/^LD_/i, "the dynamic loader (ld.so) loads code named by LD_* variables"],
  [/^DYLD_/i, "the macOS dynamic loader loads code named by DYLD_* variables"],
  [/^BUN_/i, "the Bun runtime (the worker) reads its options from BUN_* variables"],
  [/^BASH_FUNC_/i, "bash imports functions from BASH_FUNC_* variables"],
];

/** Single names, each with the program that would run code because of it. */
const HIJACK_NAMES: Readonly<Record<string, string>> = {
  BASH_ENV: "non-interactive bash sources the file it names",
  ENV: "sh and interactive shells source the file it names",
  SHELLOPTS: "bash turns on options (e.g. xtrace with PS4) from it",
  BASHOPTS: "bash turns on options from it",
  PS4: "bash expands it, command substitutions included, when tracing",
  PROMPT_COMMAND: "bash runs it as a command",
  PYTHONSTARTUP: "Python runs the file it names",
  PYTHONPATH: "Python imports modules from the directories it names before the standard ones",
  PYTHONHOME: "Python loads its standard library from the directory it names",
  PYTHONUSERBASE: "Python imports site packages from the directory it names",
  PYTHONPLATLIBDIR: "Python loads its standard library from the directory it names",
  PYTHONWARNINGS: "Python imports the module a warning category names",
  PYTHONBREAKPOINT: "Python imports and calls what it names",
  PYTHONINSPECT: "Python turns a finished script into an interactive prompt",
  PYTHONEXECUTABLE: "Python reports it as its own executable",
  PERL5OPT: "Perl takes command-line options (-M modules) from it",
  PERL5LIB: "Perl loads modules from the directories it names first",
  PERLLIB: "Perl loads modules from the directories it names first",
  PERL5DB: "Perl runs it as its debugger",
  RUBYOPT: "Ruby takes command-line options (-r libraries) from it",
  RUBYLIB: "Ruby loads libraries from the directories it names first",
  NODE_OPTIONS: "Node.js and Bun take options (--require, --preload) from it",
  NODE_PATH: "Node.js resolves modules from the directories it names",
  GCONV_PATH: "glibc loads character-set converters (shared objects) from it",
  GLIBC_TUNABLES: "glibc parses it in the loader, before the program runs",
  LOCPATH: "glibc loads locale data from the directory it names",
  NLSPATH: "glibc loads message catalogs from the path it names",
  HOSTALIASES: "the resolver reads host aliases from the file it names",
  RES_OPTIONS: "the resolver takes options from it",
  MALLOC_CHECK_: "glibc changes allocator behaviour from it",
  OPENSSL_CONF: "OpenSSL reads a configuration (which can load engines) from the file it names",
  OPENSSL_ENGINES: "OpenSSL loads engines (shared objects) from the directory it names",
  IFS: "shells split words differently with it",
};

/** Why a name is a loader/shell hijack, or null when it is not one. */
export function hijackReasonOf(name: string): string | null {
  for (const [pattern, reason] of HIJACK_PREFIXES) if (pattern.test(name)) return reason;
  const upper = name.toUpperCase();
  return Object.hasOwn(HIJACK_NAMES, upper) ? (HIJACK_NAMES[upper] ?? null) : null;
}

/** Why `name` may not be given to a job (the message names it), or null when it may. */
export function envNameRefusal(name: string): string | null {
  if (isCredentialShapedEnvName(name)) return `${name} ${CREDENTIAL_ENV_NAME_MESSAGE}`;
  const hijack = hijackReasonOf(name);
  if (hijack !== null) {
    return `${name} is refused: ${hijack}, which would run code chosen by the request outside the job's own command`;
  }
  return null;
}
