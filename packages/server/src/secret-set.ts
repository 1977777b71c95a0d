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
    return this.indexOf(candidate) >= 0;
  }

  /** Which of the secrets `candidate` is (-1: none); every digest is compared, with no early exit. */
  indexOf(candidate: string): number {
    const d = digest(candidate);
    let found = -1;
    this.digests.forEach((known, i) => {
      if (timingSafeEqual(d, known) && found < 0) found = i;
    });
    return found;
  }
}
