/**
 * One version number for everything (docs/versioning.md): every npm package, the JVM modules, the
 * Python distribution, and the versions the client guides tell users to depend on carry the root
 * package.json's version. The JVM poms stayed at 0.1.0-SNAPSHOT through 0.2.0 because nothing
 * compared them.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { REPO } from '@ticketing/test-support';

const read = (file: string): string => readFileSync(join(REPO, file), 'utf8');
const VERSION = (JSON.parse(read('package.json')) as { version: string }).version;

/** [file, the version it states] for every place a release version is written. */
function stated(): [string, string | undefined][] {
  const out: [string, string | undefined][] = [];
  for (const p of readdirSync(join(REPO, 'packages'))) {
    const file = `packages/${p}/package.json`;
    out.push([file, (JSON.parse(read(file)) as { version?: string }).version]);
  }
  // A module's own <version> (if any) is in its header, outside <parent>; a child module inherits it.
  for (const file of ['clients/jvm/pom.xml', 'clients/jvm/client/pom.xml', 'clients/jvm/spring/pom.xml']) {
    const header = read(file).split(/<(?:properties|dependencyManagement|dependencies|build|modules)>/)[0]!;
    const parent = /<parent>[\s\S]*?<version>([^<]+)<\/version>[\s\S]*?<\/parent>/.exec(header);
    const own = /<version>([^<]+)<\/version>/.exec(header.replace(/<parent>[\s\S]*?<\/parent>/, ''));
    if (!parent && !own) out.push([file, undefined]);
    if (parent) out.push([`${file} (parent)`, parent[1]]);
    if (own) out.push([file, own[1]]);
  }
  for (const m of read('examples/jvm/pom.xml').matchAll(/<artifactId>ticketing-client[^<]*<\/artifactId>\s*<version>([^<]+)<\/version>/g)) {
    out.push(['examples/jvm/pom.xml', m[1]]);
  }
  out.push(['clients/python/src/ticketing_client/_version.py', /__version__ = "([^"]+)"/.exec(read('clients/python/src/ticketing_client/_version.py'))?.[1]]);
  for (const m of read('docs/client-jvm.md').matchAll(/<artifactId>ticketing-[a-z-]+<\/artifactId>\s*<version>([^<]+)<\/version>/g)) {
    out.push(['docs/client-jvm.md', m[1]]);
  }
  return out;
}

describe('the release version', () => {
  it('is the same in every manifest and client guide', () => {
    const all = stated();
    expect(all.length).toBeGreaterThan(13);
    expect(all.filter(([, v]) => v !== VERSION)).toEqual([]);
  });

  it('has a CHANGELOG section', () => {
    expect(read('CHANGELOG.md')).toMatch(new RegExp(`^## \\[?${VERSION.replace(/\./g, '\\.')}\\]?`, 'm'));
  });
});
