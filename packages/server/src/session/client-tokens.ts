/**
 * The secrets accepted in `H`. Compared in constant time: each candidate is
 * hashed and its digest compared with every configured digest, so neither
 * the length nor the content of a configured token leaks through timing.
 * The tokens themselves are never logged.
 */
import { createHash, timingSafeEqual } from 'node:crypto';

function digest(token: string): Buffer {
  return createHash('sha256').update(token, 'utf8').digest();
}

export class ClientTokens {
  private digests: Buffer[] = [];

  constructor(tokens: readonly string[]) {
    this.replace(tokens);
  }

  /** Swaps in a new set (SIGHUP rotation); existing sessions are not affected. */
  replace(tokens: readonly string[]): void {
    this.digests = tokens.map(digest);
  }

  get required(): boolean {
    return this.digests.length > 0;
  }

  get count(): number {
    return this.digests.length;
  }

  check(token: string): boolean {
    const candidate = digest(token);
    let ok = false;
    for (const d of this.digests) ok = timingSafeEqual(candidate, d) || ok;
    return ok;
  }
}
