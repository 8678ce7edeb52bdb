#!/usr/bin/python3
"""fake_hub.py - a local stand-in for the Hugging Face Hub's HTTP endpoints, for attnmap's tests.

attnmap's `-w ORG/NAME[@REV]` downloads a model with libcurl into huggingface_hub's cache layout; its tests
may talk only to servers they start themselves on 127.0.0.1. This script is that server: the standard
library only, nothing beyond 127.0.0.1, and it exits by itself (--lifetime, --max-requests, the parent's exit).

It serves repositories from a folder tree:
    ROOT/ORG/NAME/refs.json         {"main": "<40 hex commit>", "v1.0": ..., "refs/pr/1": ...}
    ROOT/ORG/NAME/<commit>/FILE     the commit's files (FILE may contain '/'; symlinks are followed)
    ROOT/ORG/NAME/access.json       optional {"gated": bool, "private": bool, "tokens": ["hf_good", ...]}
on two listeners whose ports the OS picks, written as "API_PORT CDN_PORT\n" to --port-file:
  API  HEAD|GET /ORG/NAME/resolve/REV/FILE       plain file: 200 (ETag = git blob sha1, Range honoured);
                                                 LFS file (.safetensors .bin ...): 302 to the CDN listener,
                                                 X-Linked-Etag = sha256, X-Linked-Size; always X-Repo-Commit
       GET  /api/models/ORG/NAME[/revision/REV]  model info (sha, private, gated, siblings)
       GET  /api/models/ORG/NAME/tree/REV[/PATH]?recursive=&expand=&cursor=   paginated by Link: rel="next"
       POST /api/models/ORG/NAME/paths-info/REV  {"paths": [...], "expand": bool} (or form-encoded)
           (the last three are what @huggingface/hub's snapshotDownload calls, with the resolve URL)
  CDN  HEAD|GET /cdn/<sha256>?repo=&file=        the LFS bytes, Range honoured; no auth (a different netloc,
                                                 so a client must drop its Authorization header)
Errors are the Hub's: a JSON {"error": ...} body with X-Error-Code / X-Error-Message (RepoNotFound,
GatedRepo, RevisionNotFound, EntryNotFound). Faults for the tests: --cut-after (the first GET of each blob
stops after N body bytes), --rate (throttled bodies), --corrupt (a blob with flipped bytes), --api-fails.
--log writes one JSON line per request. GET /_quiesce (never logged or counted) answers once no request is
in flight, so a test reads a complete log after its client exits.
"""
import argparse
import glob
import hashlib
import json
import os
import re
import socket
import signal
import sys
import threading
import time
import traceback
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LFS_SUFFIXES = (".safetensors", ".bin", ".pth", ".pt", ".onnx", ".msgpack", ".h5", ".gz")
DATE = "2024-01-01T00:00:00.000Z"
stopping = []  # non-empty once the server should exit (a list: set from signal handlers and threads alike)


class HubError(Exception):
    def __init__(self, status, code, message, commit=None):
        super().__init__(message)
        self.status, self.code, self.message, self.commit = status, code, message, commit


def git_sha1(data_len, chunks):
    h = hashlib.sha1(b"blob %d\0" % data_len)
    for c in chunks:
        h.update(c)
    return h.hexdigest()


def lfs_pointer(sha256, size):
    return b"version https://git-lfs.github.com/spec/v1\noid sha256:%s\nsize %d\n" % (sha256.encode(), size)


def split_rev(parts):
    """(revision, rest) from path segments: 'refs/pr/N' may arrive unquoted as three segments."""
    if len(parts) >= 3 and parts[0] == "refs" and parts[1] in ("pr", "convert"):
        return "/".join(parts[:3]), parts[3:]
    return (parts[0] if parts else ""), parts[1:]


class Hub:
    """The repositories under --root and the state both listeners share."""

    def __init__(self, args):
        self.args, self.root = args, os.path.abspath(args.root)
        self.lock = threading.Lock()
        self.idle = threading.Condition(self.lock)
        self.digests = {}  # (real path, size, mtime) -> (etag sha1, sha256 or None, size)
        self.blobs = {}  # sha256 -> (real path, file name in its repo)
        self.cut_done = set()  # sha256s whose first GET was cut
        self.requests = self.in_flight = 0
        self.log = open(args.log, "a", encoding="utf-8") if args.log else None
        self.cdn_port = 0

    def repo(self, org, name, token):
        """(folder, refs, access) of ORG/NAME for a request carrying `token` (None without one)."""
        folder = os.path.join(self.root, org, name)
        if not all(re.fullmatch(r"[\w.-]+", s) and not s.startswith(".") for s in (org, name)) or \
                not os.path.isfile(os.path.join(folder, "refs.json")):
            raise HubError(404, "RepoNotFound", f"Repository Not Found for url: {org}/{name}")
        with open(os.path.join(folder, "refs.json"), encoding="utf-8") as f:
            refs = json.load(f)
        access = {}
        if os.path.isfile(os.path.join(folder, "access.json")):
            with open(os.path.join(folder, "access.json"), encoding="utf-8") as f:
                access = json.load(f)
        tokens = access.get("tokens", [])
        if access.get("private") and token not in tokens:
            raise HubError(401, "RepoNotFound", f"Repository Not Found for url: {org}/{name} (invalid credentials)")
        gated = f"Access to model {org}/{name} is restricted"
        if access.get("gated") and token is None:
            raise HubError(401, "GatedRepo", f"{gated}: you must be authenticated")
        if access.get("gated") and token not in tokens:
            raise HubError(403, "GatedRepo", f"{gated} and you are not in the authorized list")
        return folder, refs, access

    @staticmethod
    def commit(folder, refs, rev):
        c = refs.get(rev) or (refs.get("main") if rev == "HEAD" else None)
        if c is None and re.fullmatch(r"[0-9a-f]{40}", rev):
            c = rev
        if c is None or not os.path.isdir(os.path.join(folder, c)):
            raise HubError(404, "RevisionNotFound", f"Invalid rev id: {rev}")
        return c

    @staticmethod
    def files(folder, commit):
        """({path: real path} of the commit's files, set of its folders), paths '/'-separated."""
        base, files, dirs = os.path.join(folder, commit), {}, set()
        for cur, _, names in os.walk(base, followlinks=True):
            rel = os.path.relpath(cur, base).replace(os.sep, "/")
            if rel != ".":
                dirs.add(rel)
            for n in names:
                files[n if rel == "." else rel + "/" + n] = os.path.realpath(os.path.join(cur, n))
        return files, dirs

    def digest(self, name, real):
        """(ETag sha1, sha256 when LFS else None, size) of a file, cached by (path, size, mtime)."""
        st = os.stat(real)
        key = (real, st.st_size, st.st_mtime_ns, name.endswith(LFS_SUFFIXES))
        with self.lock:
            if key in self.digests:
                return self.digests[key]
        g, s = hashlib.sha1(b"blob %d\0" % st.st_size), hashlib.sha256()
        with open(real, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                g.update(chunk)
                s.update(chunk)
        if key[3]:  # LFS: the ETag is the git sha1 of the pointer file, as on the Hub
            sha256 = s.hexdigest()
            ptr = lfs_pointer(sha256, st.st_size)
            d = (git_sha1(len(ptr), [ptr]), sha256, st.st_size)
        else:
            d = (g.hexdigest(), None, st.st_size)
        with self.lock:
            self.digests[key] = d
            if d[1]:
                self.blobs[d[1]] = (real, name)
        return d

    def blob(self, sha256):
        """(real path, file name) of an LFS blob, hashing every repository's LFS files on a miss."""
        with self.lock:
            if sha256 in self.blobs:
                return self.blobs[sha256]
        for commit_dir in glob.glob(os.path.join(glob.escape(self.root), "*", "*", "[0-9a-f]" * 40)):
            folder, commit = os.path.split(commit_dir)
            for f, real in self.files(folder, commit)[0].items():
                if f.endswith(LFS_SUFFIXES):
                    self.digest(f, real)
        with self.lock:
            return self.blobs.get(sha256)

    def entry(self, path, real, commit, expand):
        """A tree / paths-info entry for a file."""
        sha1, sha256, size = self.digest(path, real)
        e = {"type": "file", "oid": sha1, "size": size, "path": path}
        if sha256:
            e["lfs"] = {"oid": sha256, "size": size, "pointerSize": len(lfs_pointer(sha256, size))}
        if expand:
            e["lastCommit"] = {"id": commit, "title": "Upload", "date": DATE}
            e["securityFileStatus"] = {"status": "safe"}
        return e

    @staticmethod
    def dir_entry(path):
        return {"type": "directory", "oid": git_sha1(len(path), [path.encode()]), "size": 0, "path": path}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as libcurl and undici expect; every reply has Content-Length
    timeout = 30  # an idle kept-alive connection is closed after this
    hub: Hub = None
    listener = "api"

    def log_message(self, *args):  # no stderr line per request (--log has them)
        pass

    def send_response(self, code, message=None):
        self.status = code
        super().send_response(code, message)

    def do_GET(self):  # and HEAD, POST: one dispatcher
        self.handle_request(self.command)

    do_HEAD = do_POST = do_GET

    def handle_request(self, method):
        hub, self.status, self.sent = self.hub, 0, 0
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path == "/_quiesce":  # for the tests' log readers: neither counted nor logged
            with hub.idle:
                hub.idle.wait_for(lambda: hub.in_flight == 0, timeout=5)
            return self.reply(204, [])
        with hub.lock:
            hub.requests += 1
            over = hub.requests > hub.args.max_requests
            if hub.requests >= hub.args.max_requests:
                stopping.append("max-requests")
            hub.in_flight += 1
        try:
            if over:
                raise HubError(503, None, "fake hub: --max-requests reached")
            if self.listener == "cdn":
                self.cdn(method)
            else:
                self.api(method, body)
        except HubError as e:
            hdr = [("Content-Type", "application/json; charset=utf-8")]
            ascii_message = e.message.encode("ascii", "backslashreplace").decode()
            hdr += [("X-Error-Code", e.code), ("X-Error-Message", ascii_message)] if e.code else []
            hdr += [("X-Repo-Commit", e.commit)] if e.commit else []
            self.reply(e.status, hdr, json.dumps({"error": e.message}).encode())
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        except Exception:  # a bug here: tell the client and stderr
            traceback.print_exc()
            if not self.status:
                self.reply(500, [("Content-Type", "text/plain")], b"fake hub error")
            self.close_connection = True
        finally:
            auth = self.headers.get("Authorization")
            line = {"listener": self.listener, "method": method, "path": self.path,
                    "range": self.headers.get("Range"), "auth": auth is not None, "status": self.status,
                    "bytes": self.sent}
            with hub.idle:
                if hub.log:
                    hub.log.write(json.dumps(line) + "\n")
                    hub.log.flush()
                hub.in_flight -= 1
                hub.idle.notify_all()

    def reply(self, status, headers, body=b""):
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        if not any(k == "Content-Length" for k, _ in headers):
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if body and self.command != "HEAD":
            self.wfile.write(body)
            self.sent += len(body)

    def token(self):
        m = re.fullmatch(r"Bearer\s+(\S+)", self.headers.get("Authorization", "").strip())
        return m[1] if m else None

    def api(self, method, body):
        url = urllib.parse.urlsplit(self.path)
        segs = [urllib.parse.unquote(s) for s in url.path.split("/")[1:]]
        query = dict(urllib.parse.parse_qsl(url.query))
        if segs[0] == "api":
            if self.hub.args.api_fails:
                raise HubError(500, None, "Internal Error - We're working hard to fix this as soon as possible!")
            if len(segs) >= 4 and segs[1] == "models":
                return self.api_model(method, segs[2], segs[3], segs[4:], query, body)
        elif len(segs) >= 5 and segs[2] == "resolve" and method in ("GET", "HEAD"):
            rev, parts = split_rev(segs[3:])
            return self.resolve(method, segs[0], segs[1], rev, parts)
        raise HubError(404, None, "Sorry, we can't find the page you are looking for.")

    def resolve(self, method, org, name, rev, parts):
        folder, refs, _ = self.hub.repo(org, name, self.token())
        commit = self.hub.commit(folder, refs, rev)
        file = "/".join(parts)
        real = os.path.join(folder, commit, *parts)
        if not parts or any(p in ("", ".", "..") for p in parts) or not os.path.isfile(real):
            raise HubError(404, "EntryNotFound", f"{file} does not exist on \"{rev}\"", commit)
        sha1, sha256, size = self.hub.digest(file, os.path.realpath(real))
        hdr = [("X-Repo-Commit", commit)]
        if sha256 is None:
            return self.send_file(method, os.path.realpath(real), size, hdr + [("ETag", f'"{sha1}"')])
        q = urllib.parse.quote
        location = f"http://127.0.0.1:{self.hub.cdn_port}/cdn/{sha256}?repo={q(org)}/{q(name)}&file={q(file)}"
        self.reply(302, hdr + [("Location", location), ("ETag", f'"{sha1}"'), ("X-Linked-Etag", f'"{sha256}"'),
                               ("X-Linked-Size", str(size))])

    def api_model(self, method, org, name, rest, query, body):
        folder, refs, access = self.hub.repo(org, name, self.token())
        kind = rest[0] if rest else "revision"
        rev, sub = split_rev(rest[1:]) if rest else ("main", [])
        if kind not in ("revision", "tree", "paths-info") or (kind == "paths-info") != (method == "POST"):
            raise HubError(404, None, "Sorry, we can't find the page you are looking for.")
        commit = self.hub.commit(folder, refs, rev)
        files, dirs = self.hub.files(folder, commit)
        if kind == "revision":
            info = {"_id": hashlib.sha1(f"{org}/{name}".encode()).hexdigest()[:24], "id": f"{org}/{name}",
                    "modelId": f"{org}/{name}", "author": org, "sha": commit,
                    "private": bool(access.get("private")), "gated": "auto" if access.get("gated") else False,
                    "disabled": False, "downloads": 0, "likes": 0, "tags": [], "lastModified": DATE,
                    "siblings": [{"rfilename": f} for f in sorted(files)]}
            return self.reply(200, [("Content-Type", "application/json")], json.dumps(info).encode())
        if kind == "paths-info":
            if self.headers.get("Content-Type", "").startswith("application/json"):
                req = json.loads(body or b"{}")
                paths, expand = req.get("paths", []), bool(req.get("expand"))
            else:  # huggingface_hub (Python) posts a form: paths=a&paths=b&expand=True
                form = urllib.parse.parse_qs(body.decode())
                paths, expand = form.get("paths", []), form.get("expand", [""])[0].lower() in ("1", "true")
            paths = [paths] if isinstance(paths, str) else paths
            out = [self.hub.entry(p, files[p], commit, expand) if p in files else self.hub.dir_entry(p)
                   for p in paths if p in files or p in dirs]
            return self.reply(200, [("Content-Type", "application/json")], json.dumps(out).encode())
        # tree: one folder's entries (or all below it with recursive), pages of --page-size entries
        path = "/".join(s for s in sub if s)
        if path and path not in dirs:
            raise HubError(404, "EntryNotFound", f"{path} does not exist on \"{rev}\"", commit)
        recursive = query.get("recursive", "").lower() in ("1", "true")
        expand = query.get("expand", "").lower() in ("1", "true")
        prefix = path + "/" if path else ""

        def listed(p):
            return p.startswith(prefix) and (recursive or "/" not in p[len(prefix):])
        entries = [self.hub.dir_entry(d) for d in dirs if listed(d)]
        entries += [self.hub.entry(f, real, commit, expand) for f, real in files.items() if listed(f)]
        entries.sort(key=lambda e: e["path"])
        start = int(query.get("cursor", "0") or 0)
        end = start + self.hub.args.page_size
        hdr = [("Content-Type", "application/json")]
        if end < len(entries):
            query["cursor"] = str(end)
            host = self.headers.get("Host") or f"127.0.0.1:{self.server.server_address[1]}"
            nxt = f"http://{host}{urllib.parse.urlsplit(self.path).path}?{urllib.parse.urlencode(query)}"
            hdr.append(("Link", f'<{nxt}>; rel="next"'))
        self.reply(200, hdr, json.dumps(entries[start:end]).encode())

    def cdn(self, method):
        url = urllib.parse.urlsplit(self.path)
        m = re.fullmatch(r"/cdn/([0-9a-f]{64})", url.path)
        found = self.hub.blob(m[1]) if m and method in ("GET", "HEAD") else None
        if not found:
            raise HubError(404, None, "Not Found")
        real, name = found
        corrupt = self.hub.args.corrupt in (name, os.path.basename(name))
        self.send_file(method, real, os.path.getsize(real), [("ETag", f'"{m[1]}"')], sha256=m[1], corrupt=corrupt)

    def send_file(self, method, real, size, headers, sha256=None, corrupt=False):
        """A file's bytes (Range: bytes=N- or N-M honoured); on the CDN (sha256 given) the faults apply."""
        start, end, status = 0, size - 1, 200
        rng = self.headers.get("Range")
        m = re.fullmatch(r"bytes=(\d+)-(\d*)", rng.strip()) if rng else None
        if m:
            start, end, status = int(m[1]), min(int(m[2]), size - 1) if m[2] else size - 1, 206
            if start >= size or end < start:
                return self.reply(416, headers + [("Content-Range", f"bytes */{size}")])
        length = end - start + 1
        hdr = headers + [("Content-Type", "application/octet-stream"), ("Accept-Ranges", "bytes"),
                         ("Content-Length", str(length))]
        hdr += [("Content-Range", f"bytes {start}-{end}/{size}")] if status == 206 else []
        self.reply(status, hdr)
        if method == "HEAD":
            return
        args, limit = self.hub.args, length
        if sha256 and args.cut_after is not None:
            with self.hub.lock:
                first = sha256 not in self.hub.cut_done
                self.hub.cut_done.add(sha256)
            limit = min(length, args.cut_after) if first else length
        flips = {size // 2, size - 1} if corrupt else set()
        rate = args.rate if sha256 else None
        began = time.monotonic()
        with open(real, "rb") as f:
            f.seek(start)
            while self.sent < limit:
                chunk = bytearray(f.read(min(4096 if rate else 1 << 20, limit - self.sent)))
                if not chunk:
                    break
                for pos in flips:
                    if start + self.sent <= pos < start + self.sent + len(chunk):
                        chunk[pos - start - self.sent] ^= 0xFF
                self.wfile.write(chunk)
                self.sent += len(chunk)
                if rate:
                    time.sleep(max(0.0, began + self.sent / rate - time.monotonic()))
        if limit < length:  # the cut: fewer bytes than Content-Length, then FIN
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_WR)


def serve(hub, listener):
    handler = type(f"{listener.capitalize()}Handler", (Handler,), {"hub": hub, "listener": listener})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True).start()
    return server


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--root", required=True)
    p.add_argument("--port-file", required=True)
    p.add_argument("--log")
    p.add_argument("--lifetime", type=float, default=120)
    p.add_argument("--max-requests", type=int, default=3000)
    p.add_argument("--cut-after", type=int, help="the first GET of each CDN blob sends only N body bytes")
    p.add_argument("--rate", type=float, help="CDN bodies at this many bytes per second")
    p.add_argument("--corrupt", help="the CDN serves this file (name or path in its repo) with flipped bytes")
    p.add_argument("--api-fails", action="store_true", help="every /api/ request answers 500")
    p.add_argument("--page-size", type=int, default=1000, help="tree entries per page (Link: rel=next)")
    args = p.parse_args()
    hub = Hub(args)
    parent = os.getppid()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stopping.append("signal"))
    api, cdn = serve(hub, "api"), serve(hub, "cdn")
    hub.cdn_port = cdn.server_address[1]
    with open(args.port_file + ".tmp", "w") as f:
        f.write(f"{api.server_address[1]} {cdn.server_address[1]}\n")
    os.replace(args.port_file + ".tmp", args.port_file)
    deadline = time.monotonic() + args.lifetime
    while not stopping and time.monotonic() < deadline and os.getppid() == parent:
        time.sleep(0.05)
    for server in (api, cdn):
        server.shutdown()
        server.server_close()
    if "signal" not in stopping:  # let the last requests finish (a signal means now)
        with hub.idle:
            hub.idle.wait_for(lambda: hub.in_flight == 0, timeout=2)
    print(f"fake_hub: exiting ({stopping[0] if stopping else 'lifetime or parent gone'}; "
          f"{hub.requests} requests)", file=sys.stderr)


if __name__ == "__main__":
    main()
