// snapshot.mjs - @huggingface/hub's snapshotDownload as a client independent of attnmap, for the tests: it
// fills a cache folder from tests/hub/fake_hub.py in huggingface_hub's layout (models--ORG--NAME/refs/REV,
// snapshots/<commit>/FILE -> ../../blobs/<etag>, blobs/), so attnmap's own downloads can be compared with it
// or read from it.
//   node snapshot.mjs ENDPOINT CACHE_DIR REPO [REVISION]     (HF_TOKEN in the environment: sent as a token)
// Prints the snapshot folder on stdout (the package's progress lines go to stderr); exits 1 on any error.
import { snapshotDownload } from "@huggingface/hub";

const [endpoint, cacheDir, repo, revision] = process.argv.slice(2);
if (!endpoint || !cacheDir || !repo) {
  console.error("usage: node snapshot.mjs ENDPOINT CACHE_DIR REPO [REVISION]");
  process.exit(2);
}
console.debug = (...args) => console.error(...args); // "Downloading X to Y" lines: keep stdout for the path

try {
  const folder = await snapshotDownload({
    repo,
    cacheDir,
    hubUrl: endpoint,
    ...(revision ? { revision } : {}),
    ...(process.env.HF_TOKEN ? { accessToken: process.env.HF_TOKEN } : {}),
  });
  console.log(folder);
} catch (err) {
  console.error(`snapshot.mjs: ${err?.message ?? err}${err?.cause ? ` (${err.cause.message ?? err.cause})` : ""}`);
  process.exit(1);
}
