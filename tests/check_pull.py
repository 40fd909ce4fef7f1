#!/usr/bin/env python3
"""tests/check_pull.py PAGODA DATA_DIR [--interop PYTHON] — `pagoda pull` and `--weights hf:`
against a local hub (plain Python; the real hub is never touched).

The test starts two HTTP servers on 127.0.0.1 (random ports, threads of this process): the hub,
serving /ORG/NAME/resolve/REV/FILE as huggingface.co does (X-Repo-Commit, ETag or X-Linked-Etag
and X-Linked-Size, X-Error-Code on 404 and 401, a 302 to the CDN for LFS files), and the CDN,
named by the host name `localhost` so that it is another host to the client, serving blobs with
Range. Faults are switched on per case: a dropped connection mid-file (then resumed, within a
run and across runs), a server that ignores Range, a wrong checksum, 401/403/404/429/5xx, a
stalled server (timeout), a full disk (RLIMIT_FSIZE), a hostile etag, a sharded checkpoint.

With --interop PYTHON (an interpreter with huggingface_hub): the cache is shared both ways —
files Pagoda pulled load with hf_hub_download(local_files_only=True), and files huggingface_hub
downloaded from the local hub are found by Pagoda with HF_HUB_OFFLINE=1. Exit 77 (skipped) when
PYTHON cannot import huggingface_hub, or when this pagoda was built without libcurl.
Exit 0 when all hold, 1 otherwise."""
import hashlib
import http.server
import json
import os
import resource
import shutil
import signal
import socketserver
import struct
import subprocess
import sys
import tempfile
import threading
import time

PAGODA, DATA = sys.argv[1], sys.argv[2]
INTEROP = sys.argv[sys.argv.index("--interop") + 1] if "--interop" in sys.argv else None
COMMIT = "0123456789abcdef0123456789abcdef01234567"
COMMIT2 = "fedcba9876543210fedcba9876543210fedcba98"
TOKEN = "hf_test_token"
failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what)


def tiny_safetensors(seed, n=40000):
    """A valid .safetensors of one float32 tensor (n values), different per seed."""
    head = json.dumps({"w": {"dtype": "F32", "shape": [n], "data_offsets": [0, 4 * n]}}).encode()
    head += b" " * (-len(head) % 8)
    body = struct.pack("<%df" % n, *[(i * 7 + seed) % 101 / 10.0 for i in range(n)])
    return struct.pack("<Q", len(head)) + head + body


def git_blob_id(data):
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class Repo:
    def __init__(self, files, lfs, commit=COMMIT, gated=False, tags=()):
        self.files, self.lfs, self.commit, self.gated = files, set(lfs), commit, gated
        self.revs = {"main", commit} | set(tags)


STATE = {"repos": {}, "faults": {}, "log": [], "cdn_port": 0, "blobs": {}}
LOCK = threading.Lock()


def fault(name, default=None):
    with LOCK:
        q = STATE["faults"].get(name)
        if isinstance(q, list):
            return q.pop(0) if q else default
        return q if q is not None else default


class Quiet(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def answer(self, code, headers, body=b"", head=False):
        self.send_response(code)
        for k, v in headers.items():
            self.send_header(k, v)
        if "Content-Length" not in headers:
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if not head and body:
            self.wfile.write(body)


class Hub(Quiet):
    def do_HEAD(self):
        self.serve(head=True)

    def do_GET(self):
        self.serve(head=False)

    def serve(self, head):
        with LOCK:
            STATE["log"].append(("hub", self.command, self.path, dict(self.headers)))
        if fault("hub_stall"):
            time.sleep(4)
        status = fault("hub_status")
        if status:
            return self.answer(status, {"Retry-After": "0"} if status == 429 else {}, head=head)
        parts = self.path.split("?")[0].split("/")
        # /ORG/NAME/resolve/REV/FILE...
        if len(parts) < 6 or parts[3] != "resolve":
            return self.answer(404, {"X-Error-Code": "RepoNotFound"}, head=head)
        repo = STATE["repos"].get(parts[1] + "/" + parts[2])
        rev, name = parts[4].replace("%2F", "/"), "/".join(parts[5:])
        if repo is None:
            return self.answer(404, {"X-Error-Code": "RepoNotFound"}, b"Repository not found",
                               head)
        if repo.gated and self.headers.get("Authorization") != "Bearer " + TOKEN:
            return self.answer(401, {"X-Error-Code": "GatedRepo",
                                     "X-Error-Message": "Access to this model is restricted"},
                               head=head)
        if rev not in repo.revs:
            return self.answer(404, {"X-Error-Code": "RevisionNotFound"}, head=head)
        data = repo.files.get(name)
        base = {"X-Repo-Commit": repo.commit}
        if data is None:
            return self.answer(404, dict(base, **{"X-Error-Code": "EntryNotFound"}), head=head)
        if name in repo.lfs:
            sha = fault("etag") or hashlib.sha256(data).hexdigest()
            with LOCK:
                STATE["blobs"][sha] = data
            loc = "http://localhost:%d/cdn/%s?expires=1" % (STATE["cdn_port"], sha)
            return self.answer(302, dict(base, **{
                "Location": loc, "X-Linked-Etag": '"%s"' % sha, "X-Linked-Size": str(len(data)),
                "ETag": '"%s"' % git_blob_id(b"pointer")}), head=head)
        return self.answer(200, dict(base, **{"ETag": '"%s"' % git_blob_id(data),
                                              "Content-Type": "application/json"}), data, head)


class Cdn(Quiet):
    def do_GET(self):
        with LOCK:
            STATE["log"].append(("cdn", self.command, self.path, dict(self.headers)))
        sha = self.path.split("?")[0].split("/")[-1]
        data = STATE["blobs"].get(sha)
        if data is None:
            return self.answer(404, {})
        if fault("cdn_stall"):
            time.sleep(4)
        status = fault("cdn_status")
        if status:
            return self.answer(status, {})
        rng = self.headers.get("Range")
        start = int(rng[6:].split("-")[0]) if rng and not fault("ignore_range") else 0
        body = data[start:]
        if fault("cdn_short"):  # a well-formed answer with only part of what was asked
            body = body[:1000]
        hdr = {"Content-Length": str(len(body)), "ETag": '"%s"' % sha}
        if start or len(body) < len(data):
            hdr["Content-Range"] = "bytes %d-%d/%d" % (start, start + len(body) - 1, len(data))
        self.send_response(206 if start or len(body) < len(data) else 200)
        for k, v in hdr.items():
            self.send_header(k, v)
        self.end_headers()
        drop = fault("cdn_drop")  # send this many bytes of the body, then close
        try:
            if drop:
                self.wfile.write(body[:drop])
                self.wfile.flush()
                self.close_connection = True
                self.connection.shutdown(2)
                return
            self.wfile.write(body)
        except OSError:
            pass


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def handle_error(self, request, client_address):
        pass  # a client that hung up on a dropped or stalled answer: expected here


def start(handler):
    s = Server(("127.0.0.1", 0), handler)
    threading.Thread(target=s.serve_forever, daemon=True).start()
    return s


hub, cdn = start(Hub), start(Cdn)
STATE["cdn_port"] = cdn.server_address[1]
ENDPOINT = "http://127.0.0.1:%d" % hub.server_address[1]
TMP = tempfile.mkdtemp(prefix="pagoda-pull-")

VIT = open(os.path.join(DATA, "vit-timm.safetensors"), "rb").read()
CONFIG = json.dumps({"architectures": ["ViTForImageClassification"]}).encode()
SHARD1, SHARD2 = tiny_safetensors(1), tiny_safetensors(2)
INDEX = json.dumps({"metadata": {}, "weight_map": {
    "a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors",
    "c": "model-00001-of-00002.safetensors"}}).encode()
BIG = tiny_safetensors(3, 300000)  # 1.2 MB: a drop mid-file leaves a real partial
BERT_DIR = os.path.join(DATA, "bert-tiny")
BERT = {f: open(os.path.join(BERT_DIR, f), "rb").read()
        for f in ("model.safetensors", "config.json", "vocab.txt", "tokenizer_config.json")}
STATE["repos"] = {
    "org/bert": Repo(BERT, ["model.safetensors"]),
    "org/vit": Repo({"model.safetensors": VIT, "config.json": CONFIG}, ["model.safetensors"],
                    tags=["v1"]),
    "org/big": Repo({"model.safetensors": BIG}, ["model.safetensors"], commit=COMMIT2),
    "org/sharded": Repo({"model.safetensors.index.json": INDEX,
                         "model-00001-of-00002.safetensors": SHARD1,
                         "model-00002-of-00002.safetensors": SHARD2},
                        ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]),
    "org/gated": Repo({"model.safetensors": SHARD1}, ["model.safetensors"], gated=True),
    "org/nothing": Repo({"README.md": b"# no weights\n"}, []),
    "timm/vit_base_patch16_224.augreg2_in21k_ft_in1k": Repo({"model.safetensors": VIT},
                                                            ["model.safetensors"]),
    "org/gpt2": Repo({"model.safetensors": open(os.path.join(DATA, "gpt2-tiny",
                                                         "model.safetensors"), "rb").read(),
                      "config.json": open(os.path.join(DATA, "gpt2-tiny", "config.json"),
                                          "rb").read(),
                      "vocab.json": open(os.path.join(DATA, "gpt2-tiny", "vocab.json"),
                                         "rb").read(),
                      "merges.txt": open(os.path.join(DATA, "gpt2-tiny", "merges.txt"),
                                         "rb").read()}, ["model.safetensors"]),
    "org/dino": Repo({"model.safetensors": open(os.path.join(DATA, "dino-tiny.safetensors"),
                                                "rb").read()}, ["model.safetensors"]),
}


def env_for(home, **extra):
    e = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
    e.update(HF_HOME=home, HF_ENDPOINT=ENDPOINT, HF_HUB_DOWNLOAD_TIMEOUT="5")
    e.update({k: str(v) for k, v in extra.items()})
    return e


def pull(home, *args, fsize=None, **extra):
    def limit():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
    t = time.time()
    p = subprocess.run([PAGODA, "pull"] + list(args), capture_output=True, timeout=120,
                       env=env_for(home, **extra), preexec_fn=limit if fsize else None)
    return p.returncode, p.stdout.decode(), p.stderr.decode(errors="replace"), time.time() - t


def reset(**faults):
    with LOCK:
        STATE["faults"] = faults
        STATE["log"] = []


def log(host=None, method=None):
    with LOCK:
        return [x for x in STATE["log"] if (not host or x[0] == host)
                and (not method or x[1] == method)]


def storage(home, repo):
    return os.path.join(home, "hub", "models--" + repo.replace("/", "--"))


def blob_files(home, repo):
    d = os.path.join(storage(home, repo), "blobs")
    return sorted(os.listdir(d)) if os.path.isdir(d) else []


def fresh(name):
    d = os.path.join(TMP, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    return d


def case_layout():
    home = fresh("layout")
    reset()
    rc, out, err, _ = pull(home, "org/vit", HF_TOKEN=TOKEN)
    if rc == 1 and "without libcurl" in err:
        print("skip: this pagoda was built without libcurl")
        sys.exit(77)
    check(rc == 0, "pull org/vit exits 0 (%d: %s)" % (rc, err.strip()[-300:]))
    check(err == "", "stderr is no terminal: no progress bar, nothing said (%r)" % err[-200:])
    st, sha = storage(home, "org/vit"), hashlib.sha256(VIT).hexdigest()
    snap = os.path.join(st, "snapshots", COMMIT)
    link = os.path.join(snap, "model.safetensors")
    check(os.path.islink(link) and os.readlink(link) == "../../blobs/" + sha,
          "snapshots/<commit>/model.safetensors -> ../../blobs/<sha256>")
    check(open(link, "rb").read() == VIT, "the blob holds the file's bytes")
    check(os.readlink(os.path.join(snap, "config.json")) == "../../blobs/" + git_blob_id(CONFIG),
          "config.json -> ../../blobs/<git blob id> (its ETag)")
    check(open(os.path.join(st, "refs", "main")).read() == COMMIT, "refs/main holds the commit")
    check(out.split() == [os.path.join(snap, "config.json"), link],
          "stdout lists the local paths (%r)" % out)
    check(not [b for b in blob_files(home, "org/vit") if b.endswith(".incomplete")],
          "no .incomplete left")
    hub_auth = [h.get("Authorization") for _, _, _, h in log("hub")]
    cdn_auth = [h.get("Authorization") for _, _, _, h in log("cdn")]
    check(hub_auth and all(a == "Bearer " + TOKEN for a in hub_auth), "HF_TOKEN sent to the hub")
    check(cdn_auth and not any(cdn_auth), "the token is not sent to the CDN (another host)")
    reset()
    rc, out, err, _ = pull(home, "org/vit")
    check(rc == 0 and not log("cdn"), "a second pull downloads nothing (asks the hub only)")
    rc, out2, err, _ = pull(home, "org/vit", HF_ENDPOINT="http://127.0.0.1:1")
    check(rc == 0 and out2 == out and err.count("could not be reached") == 1,
          "the hub unreachable: the cached files, said once (%s)" % err.strip())
    reset(hub_stall=[1])
    rc, out2, err, t = pull(home, "org/vit", HF_HUB_DOWNLOAD_TIMEOUT="1")
    check(rc == 0 and out2 == out and "could not be reached" in err and t < 3.5,
          "a stalled hub and a cached copy: the cache after one timeout (%.1f s)" % t)
    reset()
    rc, out, err, _ = pull(home, "org/vit@v1", "--file", "config.json")
    check(rc == 0 and open(os.path.join(st, "refs", "v1")).read() == COMMIT,
          "--file and @REVISION: refs/v1 written (%s)" % err.strip()[-200:])
    return home


def case_weights(home):
    img = os.path.join(DATA, "grad_300x200.png")
    direct = subprocess.run([PAGODA, "vit", "--json", "--topk", "2", "--weights",
                             os.path.join(DATA, "vit-timm.safetensors"), img],
                            capture_output=True, timeout=300, env=env_for(home))
    if direct.returncode == 1 and b"no OpenCL" in direct.stderr:
        print("skip --weights hf: (no OpenCL device)")
        return
    fresh_home = fresh("weights")
    reset()
    first = subprocess.run([PAGODA, "vit", "--json", "--topk", "2", "--weights", "hf:org/vit",
                            img], capture_output=True, timeout=300, env=env_for(fresh_home))
    err = first.stderr.decode(errors="replace")
    check(first.returncode == 0 and "pulling it once" in err,
          "--weights hf:org/vit pulls on first use and says so (%s)" % err.strip()[-300:])
    want = json.loads(direct.stdout)["results"][0]["top"]
    got = json.loads(first.stdout)["results"][0]["top"] if first.returncode == 0 else None
    check(got == want, "hf:org/vit classifies as the file does")
    reset(hub_status=[500] * 100)
    again = subprocess.run([PAGODA, "classify", "--json", "--topk", "2", "--weights=hf:org/vit",
                            img], capture_output=True, timeout=300,
                           env=env_for(fresh_home, HF_HUB_OFFLINE=1))
    check(again.returncode == 0 and not log() and b"pulling" not in again.stderr,
          "later runs (HF_HUB_OFFLINE=1 too) use the cache without a request")
    reset()
    feats = os.path.join(fresh_home, "feats.npy")
    emb = subprocess.run([PAGODA, "embed", "--weights", "hf:org/dino", "--heads", "2", "--output",
                          feats, img], capture_output=True, timeout=300, env=env_for(fresh_home))
    link = os.path.join(storage(fresh_home, "org/dino"), "snapshots", COMMIT, "model.safetensors")
    recorded = json.load(open(feats + ".json"))["weights"] if emb.returncode == 0 else None
    check(recorded == link, "embed --weights hf: records the snapshot's path, not the blob's, "
          "for 'similar' (%s; %s)" % (recorded, emb.stderr.decode(errors="replace")[-300:]))
    # the demo runs the ViT it names once pulled (here the test's tiny ViT under that name)
    pull(fresh_home, "timm/vit_base_patch16_224.augreg2_in21k_ft_in1k")
    reset()
    demo = subprocess.run([PAGODA, "demo", "--output-dir", os.path.join(fresh_home, "pics")],
                          capture_output=True, timeout=300, env=env_for(fresh_home))
    dout, derr = demo.stdout.decode(), demo.stderr.decode(errors="replace")
    check(demo.returncode == 0 and "(weights: hf:timm/vit_base_patch16_224.augreg2_in21k_ft_in1k,"
          in dout and "seeded random weights (b" not in derr and "pagoda pull timm/resnet50" in
          dout and not log(), "the demo runs a pulled ViT from the cache, no request, and names "
          "the pull for the rest (%s)" % (dout[-300:] + derr[-300:]))
    bad = subprocess.run([PAGODA, "vit", "--weights", "hf:org/missing", img],
                         capture_output=True, timeout=120, env=env_for(fresh_home))
    check(bad.returncode == 1 and b"org/missing: no such model repository" in bad.stderr,
          "hf: of a missing repository: the hub's 404 named")


def case_text():
    """A text model: its tokenizer files pulled beside config.json (those it has), listed on
    stdout; fill-mask --weights hf:org/bert then answers as the folder does, offline."""
    home = fresh("text")
    reset()
    rc, out, err, _ = pull(home, "org/bert")
    snap = os.path.join(storage(home, "org/bert"), "snapshots", COMMIT)
    check(rc == 0 and out.split() == [os.path.join(snap, f) for f in
                                      ("config.json", "tokenizer_config.json", "vocab.txt",
                                       "model.safetensors")],
          "pull org/bert lists config.json, the tokenizer files it has, the weights (%r %s)"
          % (out, err.strip()[-300:]))
    args = ["fill-mask", "--json", "Paris is the [MASK] of France."]
    direct = subprocess.run([PAGODA] + args + ["--weights", BERT_DIR], capture_output=True,
                            timeout=300, env=env_for(home))
    if direct.returncode == 1 and b"no OpenCL" in direct.stderr:
        return
    reset()
    hf = subprocess.run([PAGODA] + args + ["--weights", "hf:org/bert"], capture_output=True,
                        timeout=300, env=env_for(home, HF_HUB_OFFLINE=1))
    top = [json.loads(x.stdout)["results"][0]["masks"] for x in (direct, hf)
           if x.returncode == 0]
    check(len(top) == 2 and top[0] == top[1] and not log(),
          "fill-mask --weights hf:org/bert answers from the cache as the folder does (%s)"
          % hf.stderr.decode(errors="replace")[-300:])


def case_resume():
    home = fresh("resume")
    reset(cdn_drop=[500000])
    rc, out, err, _ = pull(home, "org/big")
    ranges = [h.get("Range") for _, _, _, h in log("cdn")]
    check(rc == 0 and "bytes=500000-" in ranges,
          "a dropped connection is resumed with Range in the same run (%s, %s)" % (ranges, err))
    link = os.path.join(storage(home, "org/big"), "snapshots", COMMIT2, "model.safetensors")
    check(os.path.isfile(link) and open(link, "rb").read() == BIG, "the resumed file is whole")
    home = fresh("resume2")
    reset(cdn_drop=[300000])
    rc, out, err, _ = pull(home, "org/big", "--retries", "0")
    inc = [b for b in blob_files(home, "org/big") if b.endswith(".incomplete")]
    size = os.path.getsize(os.path.join(storage(home, "org/big"), "blobs", inc[0])) if inc else -1
    check(rc == 1 and size == 300000 and "run the pull again to resume" in err,
          "--retries 0: the drop fails, the %d bytes kept, said (%s)" % (size, err.strip()[-300:]))
    reset()
    rc, out, err, _ = pull(home, "org/big")
    ranges = [h.get("Range") for _, _, _, h in log("cdn")]
    check(rc == 0 and ranges == ["bytes=300000-"] and not [
        b for b in blob_files(home, "org/big") if b.endswith(".incomplete")],
        "the next pull resumes from byte 300000 (%s)" % ranges)
    home = fresh("norange")
    reset(cdn_drop=[300000], ignore_range=True)
    rc, out, err, _ = pull(home, "org/big")
    link = os.path.join(storage(home, "org/big"), "snapshots", COMMIT2, "model.safetensors")
    check(rc == 0 and open(link, "rb").read() == BIG,
          "a server that ignores Range: the file is started over, whole")


def case_errors():
    home = fresh("errors")
    reset(etag=["00" * 32])
    rc, out, err, _ = pull(home, "org/big")
    check(rc == 1 and "checksum mismatch" in err and "removed" in err and
          not blob_files(home, "org/big") and
          not os.path.exists(os.path.join(storage(home, "org/big"), "snapshots")),
          "a wrong checksum: error, the download removed, no snapshot (%s)" % err.strip())
    reset(etag=["../../../escape"])
    rc, out, err, _ = pull(home, "org/big")
    check(rc == 1 and "refused" in err and not os.path.exists(os.path.join(TMP, "escape")),
          "a hostile etag is refused as a path (%s)" % err.strip())
    reset()
    rc, out, err, _ = pull(home, "org/gated")
    check(rc == 1 and "HF_TOKEN" in err and "401" in err and "restricted" in err,
          "401 on a gated repository says to set HF_TOKEN (%s)" % err.strip())
    rc, out, err, _ = pull(home, "org/gated", HF_TOKEN=TOKEN)
    check(rc == 0, "with HF_TOKEN the gated repository pulls")
    reset(hub_status=[403])
    rc, out, err, _ = pull(home, "org/vit")
    check(rc == 1 and "HF_TOKEN" in err and "403" in err, "403 says HF_TOKEN too")
    for spec, want in [("org/none", "org/none: no such model repository"),
                       ("org/vit@nobranch", "org/vit: no revision 'nobranch'")]:
        reset()
        rc, out, err, _ = pull(home, spec)
        check(rc == 1 and want in err, "404 names it: %s (%s)" % (want, err.strip()))
    rc, out, err, _ = pull(home, "org/vit", "--file", "nope.bin")
    check(rc == 1 and "no file 'nope.bin' at revision 'main'" in err, "404 of a file named")
    rc, out, err, _ = pull(home, "org/nothing")
    check(rc == 1 and "no model.safetensors" in err, "a repository without weights: said")
    reset(hub_status=[429, 503, 502])
    rc, out, err, t = pull(home, "org/vit", "--file", "config.json")
    check(rc == 0 and len(log("hub", "HEAD")) == 4, "429 and 5xx are retried (%d HEADs, %.1f s)"
          % (len(log("hub", "HEAD")), t))
    reset(hub_status=[503] * 10)
    rc, out, err, _ = pull(home, "org/vit", "--retries", "1", "--file", "config.json")
    check(rc == 1 and "HTTP 503" in err and len(log("hub", "HEAD")) == 2,
          "--retries 1: two tries, then the 503 named (%s)" % err.strip())
    reset(cdn_status=[503])
    rc, out, err, _ = pull(fresh("cdn503"), "org/big")
    check(rc == 0, "a 503 of the CDN is retried")
    reset(cdn_short=True)
    rc, out, err, t = pull(fresh("short"), "org/big", "--retries", "2")
    check(rc == 1 and "3000 of 1200080 bytes after 3 tries" in err,
          "short answers without an error end after the tries (%s)" % err.strip())
    reset(cdn_stall=[1])
    rc, out, err, t = pull(fresh("slow"), "org/big", "--retries", "0",
                           HF_HUB_DOWNLOAD_TIMEOUT="1")
    check(rc == 1 and "timed out" in err and t < 3.9,
          "a stalled server times out after HF_HUB_DOWNLOAD_TIMEOUT (%.1f s: %s)"
          % (t, err.strip()))
    reset()
    rc, out, err, _ = pull(fresh("offline"), "org/vit", HF_HUB_OFFLINE=1)
    check(rc == 1 and "not in the cache" in err and not log(),
          "HF_HUB_OFFLINE=1 with an empty cache: no request, said (%s)" % err.strip())
    home = fresh("fifo")
    os.makedirs(os.path.join(storage(home, "org/vit"), "refs"))
    os.mkfifo(os.path.join(storage(home, "org/vit"), "refs", "main"))
    rc, out, err, t = pull(home, "org/vit", HF_HUB_OFFLINE=1)
    check(rc == 1 and "not in the cache" in err and t < 10,
          "a FIFO as refs/main is no ref, and no hang (%s)" % err.strip())
    reset()
    home = fresh("full")
    rc, out, err, _ = pull(home, "org/big", "--retries", "0", fsize=400000)
    check(rc == 1 and "disk full" in err, "a full disk is said (%s)" % err.strip())
    for bad in ["../x", "org/a/b", "org/--x", "org/vit@../x"]:
        rc, out, err, _ = pull(home, bad)
        check(rc == 2 and ("not a hub repository" in err or "not a revision" in err),
              "bad name refused: %s" % bad)
    rc, out, err, _ = pull(home, "org/vit", "--file", "../../etc/passwd")
    check(rc == 2 and "not a file of a repository" in err, "a --file leaving the repo refused")
    for args, want in [((), "give one repository"), (("--retries", "x", "org/vit"), "--retries"),
                       (("--list", "org/vit"), "--list takes no"), (("a", "b"), "give one")]:
        rc, out, err, _ = pull(home, *args)
        check(rc == 2 and want in err, "usage error: pull %s (%s)" % (" ".join(args), err.strip()))
    reset()
    rc, out, err, _ = pull(home, "--list")
    check(rc == 0 and "facebook/detr-resnet-50" in out and not log(), "--list: no request")


def case_text_model():
    """A text model's tokenizer files come with it (config.json's model_type), and
    generate --weights hf: runs from them; an image model's pull asks for none."""
    home = fresh("text")
    reset()
    rc, out, err, _ = pull(home, "org/gpt2")
    names = [os.path.basename(x) for x in out.split()]
    check(rc == 0 and names == ["config.json", "vocab.json", "merges.txt", "model.safetensors"],
          "pull org/gpt2 lists config.json, the tokenizer files and the weights (%r %s)"
          % (names, err.strip()[-300:]))
    p = subprocess.run([PAGODA, "generate", "--weights", "hf:org/gpt2", "--max-new", "3",
                        "--json", "Once upon a time"], capture_output=True, timeout=120,
                       env=env_for(home))
    check(p.returncode == 0 and len(json.loads(p.stdout)["sequences"][0]["ids"]) == 3,
          "generate --weights hf:org/gpt2 runs from the cache (%s)" % p.stderr.decode()[-300:])
    reset()
    pull(fresh("image"), "org/vit")
    asked = [x[2] for x in log("hub")]
    check(not any(n in str(asked) for n in ("vocab.json", "merges.txt", "tokenizer.json")),
          "an image model's pull asks for no tokenizer file (%r)" % asked)


def case_sharded():
    home = fresh("sharded")
    reset()
    rc, out, err, _ = pull(home, "org/sharded")
    snap = os.path.join(storage(home, "org/sharded"), "snapshots", COMMIT)
    check(rc == 0 and len(out.split()) == 3 and
          open(os.path.join(snap, "model-00002-of-00002.safetensors"), "rb").read() == SHARD2,
          "a sharded checkpoint: the index and each shard once (%s)" % err.strip())


def hf(home, code, **extra):
    p = subprocess.run([INTEROP, "-c", code], capture_output=True, timeout=120,
                       env=env_for(home, **extra))
    return p.returncode, p.stdout.decode(), p.stderr.decode(errors="replace")


def case_interop():
    rc, _, _ = hf(TMP, "import huggingface_hub")
    if rc:
        print("skip: %s cannot import huggingface_hub" % INTEROP)
        sys.exit(77)
    home = fresh("ours")
    reset()
    pull(home, "org/vit")
    rc, out, err = hf(home, "from huggingface_hub import hf_hub_download as d\n"
                            "print(d('org/vit', 'model.safetensors', local_files_only=True))\n"
                            "print(d('org/vit', 'config.json', local_files_only=True))",
                      HF_HUB_OFFLINE=1)
    snap = os.path.join(storage(home, "org/vit"), "snapshots", COMMIT)
    check(rc == 0 and out.split() == [os.path.join(snap, "model.safetensors"),
                                      os.path.join(snap, "config.json")],
          "huggingface_hub finds what Pagoda pulled, offline (%s)" % (out + err).strip()[-400:])
    home = fresh("theirs")
    reset()
    rc, out, err = hf(home, "from huggingface_hub import hf_hub_download as d\n"
                            "print(d('org/big', 'model.safetensors'))")
    check(rc == 0, "huggingface_hub downloads from the local hub (%s)" % err.strip()[-400:])
    reset()
    rc, out2, err, _ = pull(home, "org/big", HF_HUB_OFFLINE=1)
    check(rc == 0 and out2.split() == out.split() and not log(),
          "Pagoda finds what huggingface_hub downloaded, offline (%s)" % err.strip())
    rc, out2, err, _ = pull(home, "org/big")
    check(rc == 0 and not log("cdn"), "and online asks the hub only")


try:
    if INTEROP:
        case_interop()
    else:
        home = case_layout()
        case_weights(home)
        case_text()
        case_resume()
        case_errors()
        case_sharded()
        case_text_model()
finally:
    hub.shutdown()
    cdn.shutdown()
    shutil.rmtree(TMP, ignore_errors=True)
print("%d failure(s)" % len(failures))
sys.exit(1 if failures else 0)
