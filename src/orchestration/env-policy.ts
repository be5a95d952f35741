/**
 * Which environment variable names may be given to a job. One rule for every backend: a
 * secret travels as the path to a 0600 file, never as a value in a job's environment, where
 * a scheduler prints it to anyone who asks about the job and /proc shows it to every process
 * of the uid. The API refuses these names at admission; a backend's own boundary (the scheduler
 * broker) checks them again with the same pattern.
 */

/**
 * Credential-shaped names. Deliberately broad: a false positive costs a renamed variable, a
 * false negative puts a secret where others can read it.
 */
export const CREDENTIAL_ENV_NAME_PATTERN =
  /TOKEN|SECRET|PASSWORD|PASSWD|PASSPHRASE|KEY|CREDENTIAL|CREDS|PRIVATE|AUTH|COOKIE|SIGNATURE|SESSIONID/i;

export function isCredentialShapedEnvName(name: string): boolean {
  return CREDENTIAL_ENV_NAME_PATTERN.test(name);
}

export const CREDENTIAL_ENV_NAME_MESSAGE =
  "looks like a credential: pass the path to a 0600 file instead of the secret itself";
