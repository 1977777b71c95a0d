/**
 * Which `Host` headers the admin listener answers. A web page on any site can
 * make the operator's browser send requests to 127.0.0.1:9225; after a DNS
 * rebinding its own name points there too, and the browser lets the page
 * read the answers (/status, /metrics). Such a request carries the attacker's
 * host name in `Host`. So the listener answers only a Host that is an IP
 * address literal (what a scraper or a probe sends), `localhost`, or a name
 * the operator configured (`http-hosts`), with or without a port.
 */

/** The host part of a Host header (brackets of an IPv6 literal kept), lowercased. */
function hostPart(header: string): string {
  const h = header.trim().toLowerCase();
  if (h.startsWith('[')) return h.slice(0, h.indexOf(']') + 1);
  const colon = h.lastIndexOf(':');
  return colon < 0 ? h : h.slice(0, colon);
}

function isIpLiteral(host: string): boolean {
  return /^\d{1,3}(\.\d{1,3}){3}$/.test(host) || /^\[[0-9a-f:.]+\]$/.test(host);
}

/** True when the admin listener may answer a request with this Host header (absent: HTTP/1.0 tools, allowed). */
export function hostAllowed(header: string | undefined, names: readonly string[]): boolean {
  if (header === undefined) return true;
  const host = hostPart(header);
  return isIpLiteral(host) || host === 'localhost' || names.some((n) => n.toLowerCase() === host);
}
