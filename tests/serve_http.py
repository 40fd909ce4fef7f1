#!/usr/bin/env python3
"""serve_http.py PAGODA IMAGE DATA — `pagoda serve` over real sockets (Python stdlib only).

Loads checkpoint files of each family and an hf: model from an offline Hugging Face cache.
Starts the server on a free port (--port 0; it prints its URL on stdout), checks the page and
the JSON API (classify, ViT maps, non-local affinity, DETR boxes, DINO heads and the nearest
images of a gallery made from DATA's images), then the hostile side:
oversized uploads (declared and chunked), non-images, truncated images, too many pixels, path
traversal in every parameter and in the path, wrong methods, too many and repeated arguments,
slow clients (held to --per-ip connections and closed after --timeout), a body that trickles,
parallel runs, the per-address rate limit; after each, the server must still answer. Finally
SIGTERM must stop it cleanly (exit 0). Exit 77 when this build has no `pagoda serve`."""
import http.client
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import zlib

PAGODA, IMAGE, DATA = sys.argv[1], sys.argv[2], sys.argv[3]
TIMEOUT = 3   # --timeout
PER_IP = 6    # --per-ip
failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what)


def png(width, height):
    """A valid grey PNG of width x height (compresses to almost nothing)."""
    def chunk(kind, data):
        return (struct.pack(">I", len(data)) + kind + data +
                struct.pack(">I", zlib.crc32(kind + data) & 0xffffffff))
    raw = b"".join(b"\0" + b"\x80" * width for _ in range(height))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))


class Server:
    def __init__(self, *args, env=None):
        self.p = subprocess.Popen([PAGODA, "serve", "--port", "0", *args], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True, env=env)
        line = self.p.stdout.readline()
        if not line.startswith("pagoda serve: http://"):
            err = self.p.stderr.read()
            sys.exit("serve did not start: %r %s" % (line, err))
        url = line.split("http://", 1)[1].strip().rstrip("/")
        self.host, self.port = url.rsplit(":", 1)[0], int(url.rsplit(":", 1)[1])

    def request(self, method, path, body=None, headers=None, source="127.0.0.1", timeout=120):
        c = http.client.HTTPConnection(self.host, self.port, timeout=timeout,
                                       source_address=(source, 0))
        try:
            c.request(method, path, body=body, headers=headers or {})
            r = c.getresponse()
            return r.status, dict(r.getheaders()), r.read()
        finally:
            c.close()

    def json(self, method, path, body=None, **kw):
        status, headers, data = self.request(method, path, body, **kw)
        return status, headers, json.loads(data) if data else None

    def alive(self, after):
        try:
            status, _, doc = self.json("GET", "/api/health", timeout=30)
            check(status == 200 and doc == {"ok": True}, "still serving after " + after)
        except OSError as e:
            check(False, "still serving after %s (%s)" % (after, e))

    def stop(self):
        self.p.send_signal(signal.SIGTERM)
        try:
            rc = self.p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.p.kill()
            rc = "hung"
        return rc, self.p.stderr.read()


def api_checks(s, image):
    status, headers, page = s.request("GET", "/")
    check(status == 200 and headers["Content-Type"].startswith("text/html") and
          b"<title>Pagoda</title>" in page, "GET / is the page")
    for path, kind in (("/app.js", "text/javascript"), ("/style.css", "text/css")):
        status, headers, _ = s.request("GET", path)
        check(status == 200 and headers["Content-Type"].startswith(kind), "GET " + path)
    status, _, doc = s.json("GET", "/api/models")
    names = [m["name"] for m in doc["models"]]
    check(status == 200 and names == ["random:vit_ti16", "random:resnet50-nl", "random:detr",
                                      "random:dino"],
          "/api/models lists the configured models: %s" % names)
    check(all(m["random"] for m in doc["models"]) and "--models hf:" in doc["real_weights"],
          "/api/models says the weights are random and how to get real ones")
    status, _, doc = s.json("POST", "/api/run?model=random:vit_ti16&task=classify", image)
    top = doc.get("top", [])
    check(status == 200 and len(top) == 5 and all(0 <= t["p"] <= 1 for t in top) and
          all(isinstance(t["label"], str) for t in top), "classify: top-5 classes")
    t = doc.get("timings", {})
    check(all(t.get(k, -1) >= 0 for k in ("decode", "preprocess", "forward")) and doc["device"],
          "classify: device and the timings of decode, preprocess, forward")
    status, _, doc = s.json("POST", "/api/run?model=random:vit_ti16&task=maps", image)
    ok = status == 200
    for key in ("attention", "rollout"):
        m = doc.get(key, {}) if ok else {}
        ok = ok and m.get("w") == 14 and m.get("h") == 14 and len(m["data"]) == 196 and \
            all(0 <= v <= 255 for v in m["data"]) and max(m["data"]) == 255
    check(ok and len(doc["view"]) == 4, "maps: attention and rollout 14 x 14 with the view")
    status, _, doc = s.json("POST", "/api/run?model=random:resnet50-nl&task=affinity&qx=0.25&qy=0.75",
                            image)
    a = doc.get("affinity", {}) if status == 200 else {}
    check(a.get("w", 0) > 0 and len(a.get("data", [])) == a["w"] * a["h"] and
          a["query"] == [a["w"] // 4, a["h"] * 3 // 4], "affinity: the clicked point's row: %s" %
          a.get("query"))
    status, _, doc = s.json("POST", "/api/run?model=random:detr&task=detect&threshold=0.05", image)
    boxes = doc.get("boxes", []) if status == 200 else []
    check(len(boxes) > 0 and all(len(b["box"]) == 4 and b["attention"]["data"] for b in boxes),
          "detect: %d boxes, each with its cross-attention" % len(boxes))


def dino_checks(s, image):
    status, _, doc = s.json("POST", "/api/run?model=random:dino&task=heads", image)
    heads = doc.get("heads", []) if status == 200 else []
    check(len(heads) == 6 and all(len(h["data"]) == 196 for h in heads), "DINO: 6 head maps")
    status, _, doc = s.json("POST", "/api/run?model=random:dino&task=nearest", image)
    near = doc.get("nearest", []) if status == 200 else []
    check(len(near) == 3 and near[0]["name"] == "chelsea.jpg" and near[0]["similarity"] > 0.999,
          "DINO: the nearest gallery images, the same image first: %s" % near[:1])
    status, headers, body = s.request("GET", "/api/gallery?name=chelsea.jpg")
    check(status == 200 and headers["Content-Type"] == "image/jpeg" and body == image,
          "a gallery image served by name")
    for bad in ("../chelsea.jpg", "/etc/passwd", "chelsea.jpg/../../x", ""):
        status, _, doc = s.json("GET", "/api/gallery?name=" + bad)
        check(status in (400, 404) and doc["error"]["status"] == status,
              "gallery name %r: %d" % (bad, status))
    status, _, doc = s.json("GET", "/api/gallery?file=/etc/passwd")
    check(status == 400, "gallery: another argument: 400")


def hostile_uploads(s, image):
    status, _, doc = s.json("POST", "/api/run?model=random:vit_ti16", b"x" * 300000)
    check(status == 413 and "--max-upload" in doc["error"]["message"],
          "a declared upload over --max-upload: 413")
    s.alive("a declared oversized upload")

    def chunks():
        for _ in range(40):
            yield b"y" * 10000
    # no Content-Length: http.client sends an iterable with Transfer-Encoding: chunked
    status, _, doc = s.json("POST", "/api/run?model=random:vit_ti16", chunks())
    check(status == 413, "a chunked upload over --max-upload: 413")
    s.alive("a chunked oversized upload")
    cases = [(b"this is not an image", 415, "text"), (b"", 400, "an empty body"),
             (image[: len(image) // 2], 422, "a truncated image"),
             (png(1200, 1000), 413, "an image over --max-pixels"),
             (b"GIF89a" + b"\0" * 64, 415, "a GIF")]
    for body, want, what in cases:
        status, _, doc = s.json("POST", "/api/run?model=random:vit_ti16", body)
        check(status == want and doc["error"]["status"] == want and doc["error"]["message"],
              "%s: %d (%s)" % (what, status, doc["error"]["message"][:70]))
        s.alive(what)


TRAVERSALS = ["../../../../etc/passwd", "/etc/passwd", "..%2f..%2fetc%2fpasswd",
              "%2e%2e/%2e%2e/etc/passwd", "....//....//etc/passwd", "C:\\windows\\win.ini",
              "random:vit_ti16/../../etc/passwd", "%00", "<script>alert(1)</script>"]


def traversal(s, image):
    for i, t in enumerate(TRAVERSALS):  # each from its own address: within the rate limit
        for q in ("model=%s", "model=random:vit_ti16&task=%s", "model=random:vit_ti16&qx=%s",
                  "model=random:resnet50-nl&task=affinity&qy=%s",
                  "model=random:detr&task=detect&threshold=%s", "%s=1"):
            status, _, body = s.request("POST", "/api/run?" + q % t, image,
                                        source="127.0.1.%d" % (i + 1))
            if not (400 <= status < 500 and b"root:" not in body and b"<script>" not in body):
                check(False, "traversal %r: %d %r" % (q % t, status, body[:80]))
                break
        else:
            continue
        break
    else:
        check(True, "path traversal in every argument: a 4xx, no file, nothing echoed raw")
    for t in TRAVERSALS:
        status, _, body = s.request("GET", "/api/gallery?name=" + t)
        if status != 404 or b"root:" in body:
            check(False, "gallery traversal %r: %d" % (t, status))
    for path in ("/../../etc/passwd", "/%2e%2e/%2e%2e/etc/passwd", "/static/../../etc/passwd",
                 "/api/../../../etc/passwd", "/index.html/../../etc/passwd", "/.git/config",
                 "/meson.build", "//etc/passwd"):
        status, headers, body = s.request("GET", path)
        if status == 200 and body.startswith(b"<!doctype html>\n<html lang=\"en\">\n<head>"):
            continue  # a path the client normalised back to the page itself
        check(status == 404 and b"root:" not in body, "GET %s: %d, no file" % (path, status))
    s.alive("path traversal")
    status, headers, doc = s.json("DELETE", "/api/models")
    check(status == 405 and headers.get("Allow") == "GET, HEAD", "DELETE: 405 with Allow")
    status, headers, doc = s.json("GET", "/api/run?model=random:vit_ti16")
    check(status == 405 and headers.get("Allow") == "POST", "GET /api/run: 405 with Allow")
    status, _, doc = s.json("POST", "/api/run?" + "&".join("a%d=1" % i for i in range(40)), image)
    check(status == 400 and "query arguments" in doc["error"]["message"], "40 arguments: 400")
    status, _, doc = s.json("POST", "/api/run?model=random:vit_ti16&model=random:detr", image)
    check(status == 400 and "twice" in doc["error"]["message"], "an argument twice: 400")
    status, _, doc = s.json("POST", "/api/run?model=random:detr&task=maps", image)
    check(status == 400 and "does not do" in doc["error"]["message"], "a task the model lacks")
    status, headers, body = s.request("GET", "/nowhere")
    check(status == 404 and headers["Content-Type"].startswith("text/html") and
          b"404 Not Found" in body, "an unknown page: an HTML 404 page")
    status, _, doc = s.json("GET", "/api/nowhere")
    check(status == 404 and doc["error"]["status"] == 404, "an unknown API path: a JSON 404")
    s.alive("wrong methods, arguments and paths")


def slow_clients(s):
    """Slow clients from another loopback address (so the per-address limit they reach is not
    ours): at most --per-ip stay open, and all are closed within --timeout and a margin."""
    socks, refused = [], 0
    for _ in range(PER_IP + 4):
        k = socket.socket()
        k.settimeout(5)
        k.bind(("127.0.0.2", 0))
        k.connect((s.host, s.port))
        k.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n")  # and never the end of the headers
        socks.append(k)
    time.sleep(0.5)
    open_ = []
    for k in socks:
        k.setblocking(False)
        try:
            closed = k.recv(1) == b""
        except BlockingIOError:
            closed = False
        except OSError:
            closed = True
        refused += closed
        if not closed:
            open_.append(k)
    check(len(open_) <= PER_IP and refused >= 4,
          "slow clients: %d held open (--per-ip %d), %d refused" % (len(open_), PER_IP, refused))
    s.alive("%d slow clients" % len(socks))
    start = time.time()
    for k in open_:
        k.settimeout(TIMEOUT + 10)
        try:
            while k.recv(4096):
                pass
        except OSError:
            pass
    took = time.time() - start
    check(took <= TIMEOUT + 8, "slow clients closed by the server after %.1f s (--timeout %d)" %
          (took, TIMEOUT))
    for k in socks:
        k.close()
    # a body that trickles: one byte a second, longer than --timeout in all
    k = socket.create_connection((s.host, s.port), timeout=TIMEOUT + 10, source_address=("127.0.0.2", 0))
    k.sendall(b"POST /api/run?model=random:vit_ti16 HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n")
    start, answer = time.time(), b""
    try:
        for _ in range(100):
            k.sendall(b"x")
            time.sleep(TIMEOUT / 4.0)
            if time.time() - start > TIMEOUT * 3:
                break
        answer = k.recv(4096)
    except OSError:
        pass
    k.close()
    took = time.time() - start
    check(took <= TIMEOUT * 3 + 2 and (answer == b"" or b" 408 " in answer.split(b"\r\n")[0]),
          "a trickling body: ended after %.1f s (%r)" % (took, answer[:30]))
    s.alive("a trickling body")


def parallel(s, image):
    results = []

    def one():
        try:
            results.append(s.json("POST", "/api/run?model=random:vit_ti16&task=classify", image)[0])
        except OSError as e:
            results.append(str(e))
    threads = [threading.Thread(target=one) for _ in range(PER_IP - 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    check(results.count(200) >= 1 and all(r in (200, 503) for r in results),
          "parallel runs: %s" % results)
    s.alive("parallel runs")


def rate(s):
    """From a third address: --burst runs pass, the next is 429 with Retry-After."""
    seen = []
    for _ in range(100):
        status, headers, _ = s.request("POST", "/api/run?model=nothing", b"x", source="127.0.0.3")
        seen.append(status)
        if status == 429:
            check(int(headers.get("Retry-After", "0")) >= 1, "429 says when to retry")
            break
    check(seen[-1] == 429 and seen.count(404) >= 40, "rate: %d runs, then 429" % seen.count(404))
    s.alive("the rate limit")


def file_models(image):
    """--models with checkpoint files: each family detected from its names, one run each."""
    files = ["detr-hf4.safetensors", "dino-tiny.safetensors", "nl-bottleneck.safetensors",
             "swin-timm.safetensors", "vit-hf.safetensors", "mixer-tiny.safetensors"]
    s = Server("--models", ",".join(os.path.join(DATA, f) for f in files), "--detr-side", "128")
    try:
        status, _, doc = s.json("GET", "/api/models")
        got = {m["name"]: (m["family"], m["tasks"], m["random"]) for m in doc["models"]}
        check(got == {"detr-hf4.safetensors": ("detr", ["detect"], False),
                      "dino-tiny.safetensors": ("dino", ["heads"], False),
                      "nl-bottleneck.safetensors": ("resnet", ["classify", "affinity"], False),
                      "swin-timm.safetensors": ("swin", ["classify"], False),
                      "vit-hf.safetensors": ("vit", ["classify", "maps"], False),
                      "mixer-tiny.safetensors": ("mixer", ["classify"], False)} and
              doc["real_weights"] == "", "--models FILE,...: named by their base names, "
              "families detected: %s" % got)
        for q, key in (("detr-hf4.safetensors&task=detect&threshold=0", "boxes"),
                       ("dino-tiny.safetensors&task=heads", "heads"),
                       ("nl-bottleneck.safetensors&task=affinity", "affinity"),
                       ("swin-timm.safetensors", "top"), ("vit-hf.safetensors&task=maps", "rollout"),
                       ("mixer-tiny.safetensors", "top")):
            status, _, doc = s.json("POST", "/api/run?model=" + q, image)
            check(status == 200 and doc.get(key), "a file model: %s: %d" % (q, status))
    finally:
        rc, _ = s.stop()
    check(rc == 0, "stopped cleanly")


def hub_models(image):
    """--models hf:ORG/NAME from a Hugging Face cache, offline (the hub is never asked)."""
    home = tempfile.mkdtemp(prefix="serve-hf-", dir=os.environ.get("PAGODA_TEST_TMP"))
    rev = "0123456789abcdef0123456789abcdef01234567"
    repo = os.path.join(home, "hub", "models--test--vit")
    os.makedirs(os.path.join(repo, "refs"))
    os.makedirs(os.path.join(repo, "snapshots", rev))
    with open(os.path.join(repo, "refs", "main"), "w") as f:
        f.write(rev)
    shutil.copy(os.path.join(DATA, "vit-hf.safetensors"),
                os.path.join(repo, "snapshots", rev, "model.safetensors"))
    env = dict(os.environ, HF_HOME=home, HF_HUB_OFFLINE="1")
    s = Server("--models", "hf:test/vit", env=env)
    try:
        status, _, doc = s.json("GET", "/api/models")
        m = doc["models"][0]
        check(m["name"] == "hf:test/vit" and m["family"] == "vit" and not m["random"],
              "--models hf:test/vit from the cache: %s" % m["name"])
        status, _, doc = s.json("POST", "/api/run?model=hf:test/vit&task=maps", image)
        check(status == 200 and doc.get("rollout"), "hf:test/vit runs: %d" % status)
    finally:
        rc, _ = s.stop()
    r = subprocess.run([PAGODA, "serve", "--port", "0", "--models", "hf:test/missing"],
                       capture_output=True, text=True, env=env, timeout=120)
    check(r.returncode == 1 and "not in the cache" in r.stderr,
          "hf: not in the cache, offline: exit %d" % r.returncode)
    shutil.rmtree(home, ignore_errors=True)


def two_devices(image):
    """--device SEL,SEL: each model on each device (here the first device twice), ?device=I."""
    s = Server("--device", "0:0,0:0", "--models", "random:vit_ti16")
    try:
        status, _, doc = s.json("GET", "/api/models")
        check(len(doc["devices"]) == 2, "two devices listed: %s" % doc["devices"])
        tops = []
        for d in ("0", "1"):
            status, _, doc = s.json("POST", "/api/run?model=random:vit_ti16&device=" + d, image)
            tops.append(doc["top"][0]["index"] if status == 200 else None)
        check(tops[0] is not None and tops[0] == tops[1], "the same model on each device: %s" %
              tops)
        for bad in ("2", "-1", "x", ""):
            status, _, doc = s.json("POST", "/api/run?model=random:vit_ti16&device=" + bad, image)
            check(status == 400 and "device" in doc["error"]["message"], "device=%r: 400" % bad)
    finally:
        rc, _ = s.stop()
    check(rc == 0, "stopped cleanly")


def main():
    helped = subprocess.run([PAGODA, "serve", "--help"], capture_output=True, text=True)
    if helped.returncode != 0:
        print("skip: this pagoda has no serve: " + helped.stderr.strip())
        sys.exit(77)
    check("--max-upload" in helped.stdout and "--models hf:" in helped.stdout, "serve --help")
    listed = subprocess.run([PAGODA, "--help"], capture_output=True, text=True).stdout
    check("  serve " in listed, "pagoda --help lists serve")
    for args in (["--port", "70000"], ["--bind", "localhost"], ["--nope"], ["--rate", "x"],
                 ["--models", "random:nothing"], ["--models", "/nonexistent.safetensors"]):
        r = subprocess.run([PAGODA, "serve", "--port", "0", *args], capture_output=True,
                           text=True, timeout=120)
        check(r.returncode in (1, 2) and "pagoda: error" in r.stderr,
              "serve %s: exit %d, %s" % (" ".join(args), r.returncode, r.stderr.strip()[-80:]))
    with open(IMAGE, "rb") as f:
        image = f.read()
    file_models(image)
    hub_models(image)
    two_devices(image)
    gallery = tempfile.mkdtemp(prefix="serve-gallery-", dir=os.environ.get("PAGODA_TEST_TMP"))
    for f in (IMAGE, os.path.join(DATA, "grad_300x200.png"), os.path.join(DATA, "noise_97x143.png")):
        shutil.copy(f, gallery)
    with open(os.path.join(gallery, "notes.txt"), "w") as f:
        f.write("not an image: left out\n")
    s = Server("--models", "random:vit_ti16,random:resnet50-nl,random:detr,random:dino",
               "--gallery", gallery, "--detr-side", "256",
               "--max-upload", "200000", "--max-pixels", "1000000", "--per-ip", str(PER_IP),
               "--timeout", str(TIMEOUT), "--rate", "2", "--burst", "40", "--queue", "3")
    try:
        r = subprocess.run([PAGODA, "serve", "--port", str(s.port), "--models", "random:vit_ti16"],
                           capture_output=True, text=True, timeout=120)
        check(r.returncode == 1 and "cannot listen" in r.stderr,
              "a port in use: exit %d, %s" % (r.returncode, r.stderr.strip()[-60:]))
        api_checks(s, image)
        dino_checks(s, image)
        hostile_uploads(s, image)
        traversal(s, image)
        slow_clients(s)
        parallel(s, image)
        rate(s)
    finally:
        rc, err = s.stop()
        shutil.rmtree(gallery, ignore_errors=True)
    check(rc == 0 and "stopping" in err, "SIGTERM: a clean stop (exit %s)" % rc)
    if failures:
        print("%d failed:\n  " % len(failures) + "\n  ".join(failures))
        sys.exit(1)


if __name__ == "__main__":
    main()
