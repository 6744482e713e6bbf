// The reference Bluesky PDS for tests (docs/design.md §20): @atproto/dev-env's
// TestNetworkNoAppView, a PDS with an in-process PLC directory. Started by
// tests/harness/real_pds.py with Node 22 as
//   node start.mjs <install dir> <handle> <password>
// where <install dir> holds node_modules (tests/harness/pds/install.sh puts them in
// .cache/pds). It creates one account, prints one JSON line
//   {"url": …, "handle": …, "did": …, "password": …}
// and serves until it is sent SIGTERM or its stdin closes (the test process died).
import { once } from 'node:events'
import { createRequire } from 'node:module'
import path from 'node:path'
import { pathToFileURL } from 'node:url'

const [installDir, handle, password] = process.argv.slice(2)
if (!installDir || !handle || !password) {
  console.error('usage: node start.mjs <install dir> <handle> <password>')
  process.exit(2)
}

const require = createRequire(path.join(path.resolve(installDir), 'package.json'))
const devEnv = await import(pathToFileURL(require.resolve('@atproto/dev-env')).href)

const network = await devEnv.TestNetworkNoAppView.create({})
const agent = network.pds.getAgent()
const account = await agent.createAccount({
  handle,
  password,
  email: `${handle.split('.')[0]}@example.com`,
})

let closing = false
async function shutdown(code) {
  if (closing) return
  closing = true
  try {
    await network.close()
  } finally {
    process.exit(code)
  }
}
process.on('SIGTERM', () => shutdown(0))
process.on('SIGINT', () => shutdown(0))
process.stdin.on('end', () => shutdown(0))
process.stdin.resume()

const server = network.pds.server.server // the node:http server PDS.start() made
server.close()
server.closeAllConnections()
server.listen(0, '127.0.0.1')
await once(server, 'listening')
const listening = `http://127.0.0.1:${server.address().port}`
const url = network.pds.url
process.stdout.write(
  JSON.stringify({ url, listening, handle, did: account.data.did, password }) + '\n',
)
