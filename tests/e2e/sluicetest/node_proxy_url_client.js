// Node 20 `http`/`https` through a proxy URL with credentials in it
// (http://NAME:TOKEN@127.0.0.1:PORT), read the way proxy agents read it
// (https-proxy-agent, @npmcli/agent): the URL's username and password,
// percent-decoded, as Proxy-Authorization: Basic. No npm package: https
// URLs go through a CONNECT agent (like node_client.js), http URLs to the
// proxy in absolute form. Node 20 has no NODE_USE_ENV_PROXY.
//
// usage: node node_proxy_url_client.js '{"proxy": "http://N:T@127.0.0.1:PORT", "ca": "PEM file",
//          "requests": [{"method": "GET", "url": "http(s)://..."}]}'
// prints {"results": [{"status", "headers", "body"} or {"error"}], "tunnels": N}
'use strict';
const fs = require('fs');
const http = require('http');
const https = require('https');
const tls = require('tls');

function proxyAuth(u) {
  if (!u.username && !u.password) return {};
  const creds = `${decodeURIComponent(u.username)}:${decodeURIComponent(u.password)}`;
  return { 'Proxy-Authorization': `Basic ${Buffer.from(creds).toString('base64')}` };
}

class TunnelAgent extends https.Agent {
  constructor(proxy, options) {
    super(options);
    this.proxy = proxy;
    this.tunnels = 0;
  }

  createConnection(options, callback) {
    const target = `${options.host}:${options.port || 443}`;
    const req = http.request({
      host: this.proxy.hostname, port: Number(this.proxy.port), method: 'CONNECT', path: target,
      headers: { Host: target, ...proxyAuth(this.proxy) }, agent: false,
    });
    req.once('connect', (res, socket) => {
      if (res.statusCode !== 200) {
        socket.destroy();
        callback(new Error(`CONNECT ${target}: ${res.statusCode}`));
        return;
      }
      this.tunnels += 1;
      callback(null, tls.connect({
        socket, servername: options.servername || options.host, ca: options.ca,
        ALPNProtocols: ['http/1.1'],
      }));
    });
    req.once('error', callback);
    req.end();
  }
}

function collect(resolve, reject) {
  return (res) => {
    const chunks = [];
    res.on('data', (c) => chunks.push(c));
    res.on('end', () => resolve({
      status: res.statusCode, headers: res.headers, body: Buffer.concat(chunks).toString('latin1'),
    }));
    res.on('error', reject);
  };
}

function one(agents, proxy, r) {
  return new Promise((resolve, reject) => {
    const url = new URL(r.url);
    let req;
    if (url.protocol === 'https:') {
      req = https.request(r.url, { method: r.method || 'GET', agent: agents.https }, collect(resolve, reject));
    } else {
      req = http.request({
        host: proxy.hostname, port: Number(proxy.port), method: r.method || 'GET', path: r.url,
        headers: { Host: url.host, ...proxyAuth(proxy) }, agent: agents.http,
      }, collect(resolve, reject));
    }
    req.on('error', reject);
    req.end();
  });
}

async function main() {
  const spec = JSON.parse(process.argv[2]);
  const proxy = new URL(spec.proxy);
  const agents = {
    https: new TunnelAgent(proxy, { keepAlive: true, maxSockets: 1, ca: fs.readFileSync(spec.ca) }),
    http: new http.Agent({ keepAlive: true, maxSockets: 1 }),
  };
  const results = [];
  for (const r of spec.requests) {
    try {
      results.push(await one(agents, proxy, r));
    } catch (e) {
      results.push({ error: String(e && e.message || e) });
    }
  }
  agents.https.destroy();
  agents.http.destroy();
  process.stdout.write(JSON.stringify({ results, tunnels: agents.https.tunnels }));
}

main().catch((e) => {
  process.stdout.write(JSON.stringify({ error: String(e && e.message || e) }));
  process.exit(1);
});
