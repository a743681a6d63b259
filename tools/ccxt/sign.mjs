// An independent signer for optlake's tests: ccxt's own sign() of each
// venue, run as an oracle. It reads one JSON request a line on stdin and
// writes one JSON answer a line on stdout, until stdin closes.
//
// A sign request:
//   {"venue": "kraken", "api": "private", "path": "Balance", "method": "POST",
//    "params": {...}, "credentials": {"apiKey", "secret", "password",
//    "privateKey", "walletAddress"}, "millis": 1764000000123, "nonce": "…",
//    "base": "https://127.0.0.1:4321", "options": {...}}
// answers {"url", "method", "headers", "body"} as ccxt's sign() returns
// them, with every API URL of the venue moved to base (so that a URL inside
// a signature, Coinbase's JWT uri, names the test server) and ccxt's clock
// and nonce fixed to millis and nonce (default millis).
//
// {"op": "jwt", "token": "…", "key": "<PEM private key>"} verifies the
// token's signature with node's own crypto against the key's public half
// and answers {"valid", "header", "claims"}.
//
// Errors answer {"error": "…"}; the secrets are never echoed.
import readline from 'node:readline';
import crypto from 'node:crypto';
import ccxt from 'ccxt';

function rebase(v, base) {
  if (typeof v === 'string') return v.replace(/^https?:\/\/[^/]+/, base);
  if (v && typeof v === 'object') {
    for (const k of Object.keys(v)) v[k] = rebase(v[k], base);
  }
  return v;
}

function sign(req) {
  const Ex = ccxt[req.venue];
  if (!Ex) throw new Error(`ccxt has no venue ${req.venue}`);
  const c = req.credentials || {};
  const ex = new Ex({
    apiKey: c.apiKey, secret: c.secret, password: c.password,
    privateKey: c.privateKey, walletAddress: c.walletAddress,
    options: req.options || {},
  });
  if (req.base) rebase(ex.urls.api, req.base);
  const millis = Number(req.millis);
  ex.milliseconds = () => millis;
  ex.seconds = () => Math.floor(millis / 1000);
  const nonce = req.nonce !== undefined ? req.nonce : millis;
  ex.nonce = () => nonce;
  const out = ex.sign(req.path, req.api, req.method, req.params || {}, undefined, undefined);
  return { url: out.url, method: out.method, headers: out.headers || {}, body: out.body ?? null };
}

function b64url(s) {
  return Buffer.from(s, 'base64url');
}

function verifyJWT(req) {
  const [h, p, s] = req.token.split('.');
  const header = JSON.parse(b64url(h).toString());
  const claims = JSON.parse(b64url(p).toString());
  const data = Buffer.from(h + '.' + p);
  const sig = b64url(s);
  let valid = false;
  const priv = req.key.startsWith('-----') ? crypto.createPrivateKey(req.key) : null;
  switch (header.alg) {
    case 'ES256': case 'ES384':
      valid = crypto.verify(header.alg === 'ES256' ? 'sha256' : 'sha384', data,
        { key: crypto.createPublicKey(priv), dsaEncoding: 'ieee-p1363' }, sig);
      break;
    case 'RS256':
      valid = crypto.verify('sha256', data, crypto.createPublicKey(priv), sig);
      break;
    case 'EdDSA': {
      const key = priv || crypto.createPrivateKey({
        key: Buffer.concat([Buffer.from('302e020100300506032b657004220420', 'hex'), Buffer.from(req.key, 'base64').subarray(0, 32)]),
        format: 'der', type: 'pkcs8',
      });
      valid = crypto.verify(null, data, crypto.createPublicKey(key), sig);
      break;
    }
    case 'HS256':
      valid = crypto.timingSafeEqual(crypto.createHmac('sha256', req.key).update(data).digest(), sig);
      break;
    default:
      throw new Error(`unsupported JWT algorithm ${header.alg}`);
  }
  return { valid, header, claims };
}

const rl = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
for await (const line of rl) {
  if (!line.trim()) continue;
  let answer;
  try {
    const req = JSON.parse(line);
    answer = req.op === 'jwt' ? verifyJWT(req) : sign(req);
  } catch (e) {
    answer = { error: String(e && e.message ? e.message : e).slice(0, 300) };
  }
  process.stdout.write(JSON.stringify(answer) + '\n');
}
