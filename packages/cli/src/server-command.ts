/**
 * `ticketing server`: starts one node as CLI.md says. Every config key is
 * also a flag of the same name; flags override the YAML file.
 */
import { Command, Option } from 'commander';
import type { Logger } from 'pino';
import { readFileSync } from 'node:fs';
import { describeStartError } from './start-errors.js';
import { defaultLogFormat, makeLogger } from './logger.js';
import {
  CONFIG_KEYS,
  configKeyHelp,
  configSchema,
  fileLimitWarning,
  loadConfig,
  parseOpenFileLimit,
  startAdminListener,
  startWarnings,
  TicketingNode,
  type AdminServer,
  type ServerConfig,
} from '@ticketing/server';

/** Keys whose value is true/false are bare flags (`--memory`). */
const DEFAULTS = configSchema.parse({}) as Record<string, unknown>;
const BOOLEAN_KEYS = new Set(CONFIG_KEYS.filter((k) => typeof DEFAULTS[k] === 'boolean'));

export function serverCommand(): Command {
  const cmd = new Command('server').description('start one Ticketing node').option('--config <file>', 'YAML config file; flags override it');
  for (const key of CONFIG_KEYS) {
    const description = `${configSchema.shape[key].description ?? ''} ${configKeyHelp(key)}`.trim();
    cmd.addOption(BOOLEAN_KEYS.has(key) ? new Option(`--${key}`, description) : new Option(`--${key} <value>`, description));
  }
  cmd.allowExcessArguments(false);
  cmd.action(async (opts: Record<string, unknown>) => runServer(cmd, opts));
  return cmd;
}

/** The flags actually given, under their config key names. */
function givenFlags(cmd: Command, opts: Record<string, unknown>): Record<string, unknown> {
  const flags: Record<string, unknown> = {};
  for (const key of CONFIG_KEYS) {
    const attr = key.replace(/-([a-z])/g, (_m, c: string) => c.toUpperCase());
    if (cmd.getOptionValueSource(attr) === 'cli') flags[key] = opts[attr];
  }
  return flags;
}

async function runServer(cmd: Command, opts: Record<string, unknown>): Promise<void> {
  const configFile = opts.config as string | undefined;
  // Secrets may also come from TICKETING_* variables (docs/configuration.md, Secrets).
  const readConfig = (): ServerConfig => loadConfig(givenFlags(cmd, opts), configFile, process.env);
  let config: ServerConfig;
  try {
    config = readConfig();
  } catch (err) {
    failStart(err, undefined);
  }
  const logger = makeLogger(config['log-level'], config['log-format'] ?? defaultLogFormat());
  warnOnFileLimit(config, logger);
  for (const w of startWarnings(config, configFile)) logger.warn(w.fields, w.message);
  let node: TicketingNode;
  let admin: AdminServer | undefined;
  try {
    node = await TicketingNode.start(config, {
      logger,
      onExit: (code) => {
        logger.flush();
        process.exit(code);
      },
    });
    admin = await startAdminListener(node, config, logger);
  } catch (err) {
    failStart(err, config);
  }

  let signals = 0;
  const stop = (signal: string) => {
    if (++signals > 1) {
      logger.warn({ signal }, 'second signal: exiting at once');
      process.exit(1);
    }
    void node.shutdown();
  };
  process.on('SIGINT', () => stop('SIGINT'));
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGHUP', () => {
    try {
      const next = readConfig();
      node.reload(next);
      const from = logger.level;
      if (from !== next['log-level']) {
        logger.level = next['log-level'];
        // At the new level or above, so that the line itself is written.
        const at = next['log-level'] === 'debug' ? 'info' : next['log-level'];
        logger[at]({ from, to: next['log-level'] }, 'log level changed');
      }
    } catch (err) {
      logger.error({ err }, 'reload failed; keeping the running configuration');
    }
  });
  // Only now: a SIGTERM sent as soon as the line is read must find its handler.
  // http= names the admin listener; it is missing when there is none (off, or its default port was taken).
  const http = admin === undefined ? '' : ` http=${admin.address}`;
  // A priority cluster keeps held locks only while one of its nodes runs (docs/cluster.md): say so where operators look first.
  const restart = node.status().mode === 'priority' ? ' full-restart-keeps-locks=no' : '';
  process.stdout.write(`ready role=${node.role} node=${node.nodeName} listen=${node.listenAddress}${http}${restart}\n`);
}

/**
 * Warns when the open-file limit leaves no room for max-conns, the peer links
 * and the admin listener. Node has already raised its soft limit to the hard
 * one, so what /proc shows is all this process can get.
 */
function warnOnFileLimit(config: ServerConfig, logger: Logger): void {
  let text: string;
  try {
    text = readFileSync('/proc/self/limits', 'utf8');
  } catch {
    return; // not Linux: nothing to read
  }
  const w = fileLimitWarning(config, parseOpenFileLimit(text));
  if (w !== undefined) logger.warn({ needed: w.needed, openFileLimit: w.limit }, w.message);
}

function failStart(err: unknown, config: ServerConfig | undefined): never {
  process.stderr.write(`ticketing server: ${describeStartError(err, config)}\n`);
  process.exit(2);
}
