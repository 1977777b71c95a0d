/**
 * The admin API of Raft membership (`ticketing member`):
 *
 *   GET  /members            this node's view of the membership (any node answers)
 *   POST /members            {"op":"add","name":N,"address":"HOST:PORT"} | {"op":"promote","name":N}
 *                            | {"op":"remove","name":N} | {"op":"update","name":N,"address":"HOST:PORT"}
 *   POST /members/transfer   {"to":N} or {} (the most caught-up voter)
 *
 * Changes go to the leader, which answers once the change has committed;
 * another node answers 409 with the leader it knows. A state-changing request
 * needs the http-token (Authorization: Bearer), and is refused when the node
 * has none configured, on loopback too: nothing unauthenticated changes state.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import { MembershipRefused } from '../errors.js';
import type { MembershipRequest, NodeView } from '../node/node-view.js';

/** Longest request body read (a membership request is a few dozen bytes). */
const MAX_BODY = 4096;
/** How long a change may take to commit before the answer says it did not (yet). */
const CHANGE_TIMEOUT_MS = 10_000;

export interface AdminAuth {
  /** An http-token is configured. */
  readonly configured: boolean;
  /** The request carries it. */
  readonly authorized: boolean;
}

/** Answers `req` when it is a membership request (returns false otherwise: not ours). */
export async function handleMembership(node: NodeView, req: IncomingMessage, res: ServerResponse, path: string, auth: AdminAuth, logger: Logger): Promise<boolean> {
  if (path !== '/members' && path !== '/members/transfer') return false;
  const control = node.membership?.();
  if (req.method === 'GET' && path === '/members') {
    if (auth.configured && !auth.authorized) return json(res, 401, { error: 'admin token required (Authorization: Bearer <http-token>)' });
    if (control === undefined) return json(res, 503, { error: 'not a Raft node: membership is for mode raft' });
    return json(res, 200, control.view());
  }
  if (req.method !== 'POST') {
    res.setHeader('allow', path === '/members' ? 'GET, POST' : 'POST');
    return json(res, 405, { error: `${req.method} is not allowed here` });
  }
  if (!auth.configured) return json(res, 403, { error: 'membership changes need an http-token on the node (none is configured), even on loopback' });
  if (!auth.authorized) return json(res, 401, { error: 'admin token required (Authorization: Bearer <http-token>)' });
  if (control === undefined) return json(res, 503, { error: 'not a Raft node: membership is for mode raft' });
  let body: Record<string, unknown>;
  try {
    body = await readJson(req);
  } catch (err) {
    return json(res, 400, { error: (err as Error).message });
  }
  try {
    if (path === '/members/transfer') {
      if (body.to !== undefined && typeof body.to !== 'string') return json(res, 400, { error: '"to" must be a member name' });
      logger.warn({ to: body.to ?? '(most caught-up voter)', remote: req.socket.remoteAddress }, 'raft: leadership transfer asked for through the admin API');
      const leader = await control.transfer(body.to, CHANGE_TIMEOUT_MS);
      return json(res, 200, { leader });
    }
    const request = parseRequest(body);
    if (typeof request === 'string') return json(res, 400, { error: request });
    logger.warn({ change: request, remote: req.socket.remoteAddress }, 'raft: membership change asked for through the admin API');
    return json(res, 200, await control.change(request, CHANGE_TIMEOUT_MS));
  } catch (err) {
    if (!(err instanceof MembershipRefused)) throw err;
    const leader = err.leader === undefined ? undefined : control.view().members.find((m) => m.name === err.leader);
    return json(res, err.status, { error: err.message, ...(leader === undefined ? {} : { leader: leader.name, leaderAddress: leader.address }) });
  }
}

function parseRequest(body: Record<string, unknown>): MembershipRequest | string {
  const { op, name, address } = body;
  if (typeof name !== 'string') return '"name" must be a member name';
  if (op === 'promote' || op === 'remove') return { op, name };
  if (op === 'add' || op === 'update') {
    if (typeof address !== 'string') return '"address" must be the member\'s client address, HOST:PORT';
    return { op, name, address };
  }
  return '"op" must be add, promote, remove or update';
}

async function readJson(req: IncomingMessage): Promise<Record<string, unknown>> {
  let text = '';
  for await (const chunk of req) {
    text += String(chunk);
    if (text.length > MAX_BODY) throw new Error(`request body longer than ${MAX_BODY} bytes`);
  }
  let value: unknown;
  try {
    value = JSON.parse(text === '' ? '{}' : text);
  } catch {
    throw new Error('request body is not JSON');
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new Error('request body must be a JSON object');
  return value as Record<string, unknown>;
}

function json(res: ServerResponse, status: number, body: unknown): true {
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store', 'x-content-type-options': 'nosniff' });
  res.end(`${JSON.stringify(body, null, 2)}\n`);
  return true;
}
