/**
 * Flags that mean the same in every command, defined once so that they
 * cannot drift apart:
 *
 * - `--addr HOST:PORT,...` is always a client address (the nodes' `listen`),
 *   with `TICKETING_ADDR`; `--http HOST:PORT,...` always an admin address (the
 *   nodes' `http`), with `TICKETING_HTTP`.
 * - Every secret has a flag, a `-file` flag and an environment variable for
 *   each: `--token`/`--token-file` (`TICKETING_CLIENT_TOKEN`,
 *   `TICKETING_CLIENT_TOKEN_FILE`) for a client token, and
 *   `--http-token`/`--http-token-file` (`TICKETING_HTTP_TOKEN`,
 *   `TICKETING_HTTP_TOKEN_FILE`) for the admin token. A flag wins over the
 *   variable; giving a secret and its file is an error.
 *
 * Commands that talk to the admin listener (status, and those beside it)
 * take `adminOptions`; commands that talk to the lock service take
 * `clientOptions`.
 */
import { readFileSync } from 'node:fs';
import { Command, Option } from 'commander';

/** The default server's client and admin addresses. */
export const DEFAULT_CLIENT_ADDRESS = '127.0.0.1:5225';
export const DEFAULT_ADMIN_ADDRESS = '127.0.0.1:9225';

/** Thrown for a flag value a command cannot use; `main` prints it as one line and exits 2. */
export class UsageError extends Error {}

const HOST_PORT = /^(\[[0-9a-fA-F:.]+\]|[^\s:[\]]+):(\d{1,5})$/;

/** `HOST:PORT,...` as a list; a bad entry is a usage error naming the flag. */
export function addressList(flag: string) {
  return (value: string): string[] => {
    const list = value.split(',').map((a) => a.trim()).filter((a) => a !== '');
    const bad = list.length === 0 ? '' : list.find((a) => {
      const m = HOST_PORT.exec(a);
      return m === null || Number(m[2]) < 1 || Number(m[2]) > 65535;
    });
    if (bad !== undefined) throw new UsageError(`${flag} must be host:port[,host:port...] (got ${JSON.stringify(bad)})`);
    return list;
  };
}

export function clientAddressOption(): Option {
  return new Option('--addr <host:port,...>', "client addresses of the server or cluster nodes (their listen)")
    .env('TICKETING_ADDR')
    .default([DEFAULT_CLIENT_ADDRESS], DEFAULT_CLIENT_ADDRESS)
    .argParser(addressList('--addr'));
}

export function adminAddressOption(): Option {
  return new Option('--http <host:port,...>', "admin listener addresses of the nodes (their http)").env('TICKETING_HTTP').argParser(addressList('--http'));
}

/** Adds `--NAME <secret>` and `--NAME-file <file>` with their environment variables. */
function secretOptions(cmd: Command, name: string, variable: string, what: string): Command {
  return cmd
    .addOption(new Option(`--${name} <secret>`, what).env(variable))
    .addOption(new Option(`--${name}-file <file>`, `file holding the ${name} (keeps it out of ps)`).env(`${variable}_FILE`));
}

export function clientTokenOptions(cmd: Command): Command {
  return secretOptions(cmd, 'token', 'TICKETING_CLIENT_TOKEN', "client token (one of the server's client-tokens)");
}

export function adminTokenOptions(cmd: Command): Command {
  return secretOptions(cmd, 'http-token', 'TICKETING_HTTP_TOKEN', "admin token (the nodes' http-token)");
}

/** The secret from `--NAME` or `--NAME-file` (trimmed; never echoed in an error). */
export function secret(opts: Record<string, unknown>, name: 'token' | 'httpToken', flag: string): string | undefined {
  const value = opts[name] as string | undefined;
  const file = opts[`${name}File`] as string | undefined;
  if (file === undefined) return value;
  if (value !== undefined) throw new UsageError(`give --${flag} or --${flag}-file, not both`);
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new UsageError(`cannot read --${flag}-file ${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
  const token = text.trim();
  // eslint-disable-next-line no-control-regex
  if (!/^[^\s\x00-\x1f\x7f]{1,200}$/.test(token)) throw new UsageError(`--${flag}-file ${file} must hold one secret of 1..200 characters without spaces`);
  return token;
}
