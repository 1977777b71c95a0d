/** Just enough of Redis's RESP protocol for the benchmark's peer workloads. */
import { connect } from 'node:net';

export function respCommand(args: readonly string[]): string {
  let out = `*${args.length}\r\n`;
  for (const a of args) out += `$${Buffer.byteLength(a)}\r\n${a}\r\n`;
  return out;
}

/** SCRIPT LOAD on its own connection; resolves with the script's SHA1. */
export async function redisScriptLoad(host: string, port: number, script: string): Promise<string> {
  const socket = connect({ host, port });
  socket.write(respCommand(['SCRIPT', 'LOAD', script]));
  let data = '';
  return new Promise<string>((resolve, reject) => {
    socket.on('data', (d: Buffer) => {
      data += d.toString();
      const m = /^\$40\r\n([0-9a-f]{40})\r\n/.exec(data);
      if (m !== null) {
        socket.destroy();
        resolve(m[1]!);
      } else if (data.startsWith('-')) {
        socket.destroy();
        reject(new Error(`SCRIPT LOAD failed: ${data.trim()}`));
      }
    });
    socket.on('error', reject);
  });
}
