/**
 * What `ticketing server --help` says about each key besides its
 * description: the default, the values allowed and the environment variable
 * that may hold it, all read from the one schema so the help cannot drift.
 */
import { z } from 'zod';
import { SECRET_ENV } from './load.js';
import { configSchema, type ConfigKey } from './schema.js';

interface JsonProperty {
  readonly default?: unknown;
  readonly enum?: readonly string[];
  readonly type?: string;
  readonly minimum?: number;
  readonly maximum?: number;
}

const PROPERTIES = (z.toJSONSchema(configSchema, { io: 'output', unrepresentable: 'any' }) as { properties: Record<string, JsonProperty> }).properties;

/** `(default: 500; allowed: 50..60000; env: TICKETING_X)`, or '' when there is nothing to add. */
export function configKeyHelp(key: ConfigKey): string {
  const p = PROPERTIES[key] ?? {};
  const parts: string[] = [];
  const d = p.default;
  if (d !== undefined && !(Array.isArray(d) && d.length === 0) && d !== false) parts.push(`default: ${Array.isArray(d) ? d.join(',') : JSON.stringify(d).replace(/^"|"$/g, '')}`);
  if (p.enum !== undefined) parts.push(`one of: ${p.enum.join(', ')}`);
  else if (p.type === 'integer' && p.minimum !== undefined && p.maximum !== undefined) parts.push(`allowed: ${p.minimum}..${p.maximum}`);
  const variable = SECRET_ENV[key];
  if (variable !== undefined) parts.push(`env: ${variable}`);
  return parts.length === 0 ? '' : `(${parts.join('; ')})`;
}
