/**
 * The one way the server compares secrets (client tokens in `H`, the peer
 * token in HELLO, the admin HTTP token): in constant time. The candidate is
 * hashed and its digest compared with every configured digest, with no early
 * exit, so neither the length nor the content of a configured secret leaks
 * through timing. The secrets themselves are never kept or logged.
 */
import { createHash, timingSafeEqual } from 'node:crypto';

function digest(secret: string): Buffer {
  return createHash('sha256').update(secret, 'utf8').digest();
}

export class SecretSet {
  private digests: Buffer[] = [];

  constructor(secrets: readonly string[]) {
    this.replace(secrets);
  }

  /** Swaps in a new set (SIGHUP rotation). */
  replace(secrets: readonly string[]): void {
    this.digests = secrets.map(digest);
  }

  get count(): number {
    return this.digests.length;
  }

  /** True when `candidate` is one of the secrets. */
  matches(candidate: string): boolean {
    const d = digest(candidate);
    let ok = false;
    for (const known of this.digests) ok = timingSafeEqual(d, known) || ok;
    return ok;
  }
}
