import { type Command, UsageError } from "../../lib/command/command.ts";
import {
  CLIENT_OPTIONS_HELP,
  type ClientRuntime,
  createClientCommand,
  encodeId,
  printJson,
  reportFailure,
  systemRuntime,
} from "./client.ts";
import { parseDurationFlag } from "./duration.ts";

const HELP = `Usage: openai4s token issue NAME [--expires DURATION]
       openai4s token revoke ID

Issue a bearer token for principal NAME, or revoke one by its id. Admin only. The token
is printed once, on stdout: the daemon keeps only a hash of it and cannot show it again.
Hand it to the principal as a file (--token-file) or $OPENAI4S_TOKEN.

Options:
  --expires DURATION   The token stops working after this long: 90s, 15m, 2h, 30d,
                       1d12h, HH:MM:SS or D-HH:MM:SS. Default: never.
${CLIENT_OPTIONS_HELP}`;

interface IssuedBody {
  readonly id: string;
  readonly principal: string;
  readonly token: string;
  readonly expiresAt: string | null;
}

function expiresSeconds(text: string | undefined): number | undefined {
  return parseDurationFlag("token issue", "--expires", text);
}

export function createTokenCommand(runtime: ClientRuntime = systemRuntime): Command {
  return createClientCommand(runtime, {
    name: "token",
    summary: "Issue or revoke a principal's token (admin only)",
    help: HELP,
    options: { expires: { type: "string" } },
    async run({ values, positionals, io, json, connect }) {
      const [action, arg, ...rest] = positionals;
      if (rest.length > 0) throw new UsageError(`token: unexpected argument "${rest[0]}"`);
      switch (action) {
        case "issue": {
          if (arg === undefined) throw new UsageError("token issue: NAME is required");
          const seconds = expiresSeconds(values.expires);
          const result = await (await connect()).request<IssuedBody>(
            "POST",
            `/v1/principals/${encodeId(arg)}/tokens`,
            { body: seconds === undefined ? {} : { expiresInSeconds: seconds } },
          );
          if (result.kind !== "Ok") return reportFailure("token issue", result, io, json);
          if (json) {
            printJson(io, result.body);
            return 0;
          }
          // The token alone on stdout, so `> file` captures exactly it; the rest on stderr.
          io.stdout(`${result.body.token}\n`);
          io.stderr(
            `token ${result.body.id} for ${result.body.principal}, expires ${result.body.expiresAt ?? "never"}; shown once, keep it secret\n`,
          );
          return 0;
        }
        case "revoke": {
          if (arg === undefined) throw new UsageError("token revoke: ID is required");
          const result = await (await connect()).request<{ id: string }>(
            "POST",
            `/v1/tokens/${encodeId(arg)}/revoke`,
          );
          if (result.kind !== "Ok") return reportFailure("token revoke", result, io, json);
          if (json) printJson(io, result.body);
          else io.stdout(`token revoked: ${arg}\n`);
          return 0;
        }
        default:
          throw new UsageError(
            `token: expected issue or revoke${action === undefined ? "" : `, not "${action}"`}`,
          );
      }
    },
  });
}

export const tokenCommand = createTokenCommand();
