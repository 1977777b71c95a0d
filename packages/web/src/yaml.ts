/**
 * Writes a flat config (scalars and lists of scalars) as YAML. Strings are
 * written plain only when YAML cannot read them as anything else; otherwise
 * double-quoted (JSON string syntax is valid YAML).
 */
const PLAIN = /^[A-Za-z_/][A-Za-z0-9_./-]*$/;
const RESERVED = /^(true|false|yes|no|on|off|y|n|null)$/i;

export type YamlValue = string | number | boolean | readonly string[];

function scalar(value: string | number | boolean): string {
  if (typeof value !== 'string') return String(value);
  return PLAIN.test(value) && !RESERVED.test(value) ? value : JSON.stringify(value);
}

export function toYaml(config: Readonly<Record<string, YamlValue>>, comments: readonly string[] = []): string {
  const lines = comments.map((c) => `# ${c}`);
  for (const [key, value] of Object.entries(config)) {
    if (Array.isArray(value) && value.length === 0) lines.push(`${key}: []`);
    else if (Array.isArray(value)) lines.push(`${key}:`, ...(value as readonly string[]).map((item) => `  - ${scalar(item)}`));
    else lines.push(`${key}: ${scalar(value as string | number | boolean)}`);
  }
  return `${lines.join('\n')}\n`;
}
