// h2fid_node.js - Node's http2 module as a client for h2_fidelity.py: one GET
// over clear-text HTTP/2 (prior knowledge), printing its status, the body's
// sha256 and size, and the protocol the session spoke, as JSON.
// usage: node h2fid_node.js http://HOST:PORT PATH
'use strict';
const http2 = require('http2');
const crypto = require('crypto');

const [url, path] = process.argv.slice(2);
const session = http2.connect(url);
const out = (o) => { console.log(JSON.stringify(o)); session.destroy(); };
session.on('error', (e) => out({ error: String(e.code || e) }));
const req = session.request({ ':path': path });
const hash = crypto.createHash('sha256');
let status = null;
let n = 0;
req.on('response', (h) => { status = h[':status']; });
req.on('data', (d) => { hash.update(d); n += d.length; });
req.on('end', () => out({ status, sha: hash.digest('hex'), n,
                          version: status === null ? null : '2', alpn: session.alpnProtocol }));
req.on('error', (e) => out({ error: String(e.code || e) }));
req.end();
