import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { CONFIG_KEYS, configSchema } from '../src/config/schema.js';

const doc = readFileSync(new URL('../../../docs/configuration.md', import.meta.url), 'utf8');
const rows = new Map<string, string>();
for (const line of doc.split('\n')) {
  const m = /^\| `([a-z-]+)` \| ([^|]+) \|/.exec(line);
  if (m !== null) rows.set(m[1]!, m[2]!.trim());
}

describe('docs/configuration.md', () => {
  it('documents every config key, and nothing that is not one', () => {
    expect([...rows.keys()].sort()).toEqual([...CONFIG_KEYS].sort());
  });

  it('states each default as the schema has it', () => {
    const defaults = configSchema.parse({}) as Record<string, unknown>;
    for (const key of CONFIG_KEYS) {
      const value = defaults[key];
      const documented = rows.get(key)!;
      if (value === undefined) expect(documented, key).toMatch(/^(unset|the host name)$/);
      else if (Array.isArray(value) && value.length === 0) expect(documented, key).toBe('none');
      else expect(documented, key).toBe(`\`${String(value as string | number | boolean)}\``);
    }
  });
});
