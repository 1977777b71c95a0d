/** Reader for testdata/wire-vectors.txt (format described at the top of that file). */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

export interface WireVector {
  readonly dir: 'req' | 'rep';
  readonly bytes: Buffer;
  readonly source: string;
  readonly expected: { ok: true } | { ok: false; code: string };
  readonly lineNo: number;
}

const file = fileURLToPath(new URL('../../../testdata/wire-vectors.txt', import.meta.url));

export function unescapeVector(text: string): Buffer {
  const out: number[] = [];
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (c !== '\\') {
      out.push(...Buffer.from(c, 'utf8'));
      continue;
    }
    const n = text[++i];
    if (n === '\\') out.push(0x5c);
    else if (n === 't') out.push(0x09);
    else if (n === 'r') out.push(0x0d);
    else if (n === 'x') {
      out.push(parseInt(text.slice(i + 1, i + 3), 16));
      i += 2;
    } else if (n === '=') {
      const count = parseInt(text.slice(i + 1, i + 4), 10);
      const ch = text.charCodeAt(i + 4);
      for (let k = 0; k < count; k++) out.push(ch);
      i += 4;
    } else throw new Error(`bad escape \\${n} in vector ${text}`);
  }
  return Buffer.from(out);
}

export function loadVectors(): WireVector[] {
  const lines = readFileSync(file, 'utf8').split('\n');
  const vectors: WireVector[] = [];
  lines.forEach((line, idx) => {
    if (line === '' || line.startsWith('#')) return;
    const [dir, source, expected] = line.split('\t');
    if ((dir !== 'req' && dir !== 'rep') || source === undefined || expected === undefined) {
      throw new Error(`malformed vector at line ${idx + 1}: ${line}`);
    }
    vectors.push({
      dir,
      source,
      bytes: unescapeVector(source),
      expected: expected === 'ok' ? { ok: true } : { ok: false, code: expected.replace(/^err /, '') },
      lineNo: idx + 1,
    });
  });
  return vectors;
}
