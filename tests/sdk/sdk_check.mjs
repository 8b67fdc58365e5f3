// Drives vaultgraph with the public Basis Theory JS SDK (1.79.3, the last with association calls):
// create, retrieve, update, list (filters and pages, exact answers), associations, children,
// delete. The SDK sends its key in BT-API-KEY; a small relay here renames it to SVC-API-KEY
// (vaultgraph's only key header) and changes nothing else, so every path, method and body is the
// SDK's own (POST /tokens/, …).
// Usage: VAULTGRAPH_URL=http://127.0.0.1:8080 VAULTGRAPH_KEY=vg_… node sdk_check.mjs
// Prints one JSON line of what it checked; exit 1 with the failing step otherwise.
import assert from 'node:assert/strict';
import http from 'node:http';
import { BasisTheory } from '@basis-theory/basis-theory-js';

const target = new URL(process.env.VAULTGRAPH_URL);
const key = process.env.VAULTGRAPH_KEY;
const seen = [];

const relay = http.createServer((req, res) => {
  seen.push(`${req.method} ${req.url.split('?')[0]}`);
  const headers = { ...req.headers, host: target.host };
  if (headers['bt-api-key'] !== undefined) {
    headers['svc-api-key'] = headers['bt-api-key'];
    delete headers['bt-api-key'];
  }
  const upstream = http.request(
    { hostname: target.hostname, port: target.port, path: req.url, method: req.method, headers },
    (answer) => {
      res.writeHead(answer.statusCode, answer.headers);
      answer.pipe(res);
    });
  upstream.on('error', (err) => { res.writeHead(502); res.end(String(err.code)); });
  req.pipe(upstream);
});
// The SDK speaks plain HTTP only to a host named localhost.
await new Promise((resolve) => relay.listen(0, 'localhost', resolve));

const step = async (name, work) => {
  try {
    return await work();
  } catch (err) {
    const detail = err?.data ?? err?.message ?? String(err);
    console.error(`sdk step failed: ${name}: ${JSON.stringify(detail)}`);
    process.exit(1);
  }
};

const bt = await new BasisTheory().init(key, {
  apiBaseUrl: `http://localhost:${relay.address().port}`,
});

const parent = await step('create', () => bt.tokens.create({
  type: 'token', data: 'sdk parent secret', metadata: { source: 'sdk' },
}));
assert.equal(parent.type, 'token');
assert.equal(parent.data, 'sdk parent secret');

const got = await step('retrieve', () => bt.tokens.retrieve(parent.id));
assert.equal(got.id, parent.id);
assert.equal(got.data, 'sdk parent secret');

const updated = await step('update', () => bt.tokens.update(parent.id, {
  metadata: { tier: 'gold' },
}));
assert.deepEqual(updated.metadata, { source: 'sdk', tier: 'gold' });

const other = await step('create second', () => bt.tokens.create({
  type: 'token', data: 'sdk other secret', metadata: { source: 'sdk' },
}));
const third = await step('create third', () => bt.tokens.create({
  type: 'token', data: 'sdk third secret',
}));
// The SDK lists at GET /tokens/?…: every filter must reach the service (the tenant is the
// test's own, so these three are all its tokens and each answer is exact).
const ids = (page) => page.data.map((t) => t.id).sort();
const all = await step('list', () => bt.tokens.list({ type: 'token', size: 100 }));
assert.deepEqual(ids(all), [parent.id, other.id, third.id].sort());
const gold = await step('list by metadata', () => bt.tokens.list({ metadata: { tier: 'gold' } }));
assert.deepEqual(ids(gold), [parent.id], 'metadata.tier=gold lists the one gold token');
const sdkTagged = await step('list by metadata', () => bt.tokens.list({
  metadata: { source: 'sdk' },
}));
assert.deepEqual(ids(sdkTagged), [parent.id, other.id].sort());
const byId = await step('list by id', () => bt.tokens.list({ id: [parent.id, third.id] }));
assert.deepEqual(ids(byId), [parent.id, third.id].sort(), 'id=… lists just those tokens');
const first = await step('list a page', () => bt.tokens.list({ size: 2 }));
assert.equal(first.data.length, 2);
assert.equal(first.pagination.pageSize, 2);
assert.ok(first.pagination.next, 'a second page follows');
const rest = await step('list the next page', () => bt.tokens.list({
  size: 2, start: first.pagination.next,
}));
assert.deepEqual([...ids(first), ...ids(rest)].sort(), ids(all), 'two pages hold each once');
await step('delete third', () => bt.tokens.delete(third.id));

await step('createAssociation', () => bt.tokens.createAssociation(parent.id, other.id));
const child = await step('createChild', () => bt.tokens.createChild(parent.id, {
  type: 'token', data: 'sdk child secret',
}));
const children = await step('listChildren', () => bt.tokens.listChildren(parent.id));
assert.deepEqual(children.data.map((t) => t.id).sort(), [other.id, child.id].sort());
await step('deleteAssociation', () => bt.tokens.deleteAssociation(parent.id, other.id));
const left = await step('listChildren after', () => bt.tokens.listChildren(parent.id));
assert.deepEqual(left.data.map((t) => t.id), [child.id]);

for (const id of [child.id, other.id, parent.id]) {
  await step('delete', () => bt.tokens.delete(id));
}
const gone = await bt.tokens.retrieve(parent.id).then(() => null, (err) => err);
assert.equal(gone?.status, 404, 'a deleted token is gone');

relay.close();
console.log(JSON.stringify({ ok: true, requests: seen }));
