/**
 * The permission bits an upload may ask for. A workspace file is the job's input: a setuid
 * or setgid bit would hand whoever runs it the rights of its owner (a leased uid, or the
 * scientist on a run-as-owner profile), and a world-writable file can be rewritten by every
 * account on the node between the upload and the job's read. Those are refused by name
 * rather than quietly dropped, so what the client asked is what the file has, or a 400.
 */

export type FileModeChoice =
  | { readonly kind: "Mode"; readonly bits: number }
  | { readonly kind: "Refused"; readonly message: string };

const OCTAL = /^0?[0-7]{3,4}$/;

/** `0644` or `644` (or `04755`, to be refused by name), as bits or why not. */
export function parseUploadMode(text: string): FileModeChoice {
  if (!OCTAL.test(text)) {
    return {
      kind: "Refused",
      message: `must be octal permission bits such as 0600 or 644, got ${JSON.stringify(text)}`,
    };
  }
  const bits = Number.parseInt(text, 8);
  const refused: string[] = [];
  if (bits & 0o4000) refused.push("setuid");
  if (bits & 0o2000) refused.push("setgid");
  if (bits & 0o1000) refused.push("sticky");
  if (bits & 0o002) refused.push("world-writable");
  if (refused.length > 0) {
    return {
      kind: "Refused",
      message: `${text} is ${refused.join(", ")}: a workspace file may not be (use 0644, 0640 or 0600)`,
    };
  }
  return { kind: "Mode", bits };
}

/** Bits as the API shows them: four octal digits, `0600`. */
export function showMode(bits: number): string {
  return `0${(bits & 0o777).toString(8).padStart(3, "0")}`;
}
