// h2fid_node.js - Node's http2 module as a client for h2_fidelity.py: GETs
// over one clear-text HTTP/2 session (prior knowledge), one after the other,
// printing for each its status, the body's sha256 and size, and the protocol
// the session spoke, as a JSON line.
// usage: node h2fid_node.js http://HOST:PORT PATH...
'use strict';
const http2 = require('http2');
const crypto = require('crypto');

const [url, ...paths] = process.argv.slice(2);
const session = http2.connect(url);
session.on('error', (e) => { console.log(JSON.stringify({ error: String(e.code || e) })); });

function get(path) {
  return new Promise((resolve) => {
    const req = session.request({ ':path': path });
    const hash = crypto.createHash('sha256');
    let status = null;
    let n = 0;
    req.on('response', (h) => { status = h[':status']; });
    req.on('data', (d) => { hash.update(d); n += d.length; });
    req.on('end', () => resolve({ status, sha: hash.digest('hex'), n,
                                  version: status === null ? null : '2',
                                  alpn: session.alpnProtocol }));
    req.on('error', (e) => resolve({ error: String(e.code || e) }));
    req.end();
  });
}

(async () => {
  for (const p of paths) console.log(JSON.stringify(await get(p)));
  session.close();
})();
