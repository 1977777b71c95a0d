/**
 * A small JSON Schema validator for the subset of keywords the server's
 * generated config schema uses (config-schema.generated.ts). The generator's
 * drift check fails if the schema starts using a keyword not listed here,
 * so the page can never silently skip a rule the server enforces.
 */
export interface JsonSchema {
  $schema?: string;
  type?: 'object' | 'array' | 'string' | 'integer' | 'number' | 'boolean';
  description?: string;
  default?: unknown;
  properties?: Record<string, JsonSchema>;
  additionalProperties?: boolean;
  items?: JsonSchema;
  enum?: readonly unknown[];
  pattern?: string;
  minLength?: number;
  maxLength?: number;
  minimum?: number;
  maximum?: number;
  /** Valid when at least one of these is (client-tokens entries: a bare token or a named identity). */
  anyOf?: readonly JsonSchema[];
  /** Keys an object must have. */
  required?: readonly string[];
}

export const SUPPORTED_KEYWORDS: readonly string[] = [
  '$schema', 'type', 'description', 'default', 'properties', 'additionalProperties', 'items',
  'enum', 'pattern', 'minLength', 'maxLength', 'minimum', 'maximum', 'anyOf', 'required',
];

/** Problems with `value`, each as `where: what`; empty when valid. */
export function validate(schema: JsonSchema, value: unknown, where = 'config'): string[] {
  if (schema.anyOf !== undefined) {
    const each = schema.anyOf.map((s) => validate(s, value, where));
    // Valid if one form fits; otherwise the problems of the form that came closest.
    if (each.some((p) => p.length === 0)) return [];
    return each.reduce((a, b) => (b.length < a.length ? b : a));
  }
  const typeProblem = checkType(schema.type, value);
  if (typeProblem !== undefined) return [`${where}: ${typeProblem}`];
  const problems: string[] = [];
  const add = (what: string) => problems.push(`${where}: ${what}`);
  if (schema.enum !== undefined && !schema.enum.includes(value)) add(`must be one of ${schema.enum.join(', ')}`);
  if (typeof value === 'string') {
    if (schema.minLength !== undefined && value.length < schema.minLength) add(`must have at least ${schema.minLength} characters`);
    if (schema.maxLength !== undefined && value.length > schema.maxLength) add(`must have at most ${schema.maxLength} characters`);
    if (schema.pattern !== undefined && !new RegExp(schema.pattern).test(value)) add(`${JSON.stringify(value)} is not of the allowed form`);
  }
  if (typeof value === 'number') {
    const min = schema.minimum ?? -Infinity;
    const max = schema.maximum ?? Infinity;
    if (value < min || value > max) add(`must be from ${min} to ${max}`);
  }
  if (Array.isArray(value) && schema.items !== undefined) {
    value.forEach((item, i) => problems.push(...validate(schema.items!, item, `${where}[${i}]`)));
  }
  if (isObject(value)) {
    for (const key of schema.required ?? []) if (!(key in value)) add(`${key} is required`);
    for (const [key, item] of Object.entries(value)) {
      const sub = schema.properties?.[key];
      if (sub !== undefined) problems.push(...validate(sub, item, key));
      else if (schema.additionalProperties === false) problems.push(`${key}: is not a known key`);
    }
  }
  return problems;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function checkType(type: JsonSchema['type'], value: unknown): string | undefined {
  switch (type) {
    case undefined:
      return undefined;
    case 'object':
      return isObject(value) ? undefined : 'must be a mapping';
    case 'array':
      return Array.isArray(value) ? undefined : 'must be a list';
    case 'integer':
      return Number.isInteger(value) ? undefined : 'must be an integer';
    case 'number':
      return typeof value === 'number' && Number.isFinite(value) ? undefined : 'must be a number';
    default:
      return typeof value === type ? undefined : `must be a ${type}`;
  }
}
