#!/usr/bin/env python3
"""serve_browser.py PAGODA IMAGE EXPECTED_DIR [--update] [--docs DIR] — `pagoda serve`'s page
in headless Chromium (Debian's `chromium`), driven over the DevTools protocol with a small
WebSocket client of the standard library (no package to install).

Uploads IMAGE through the page's file input for a ViT's attention maps, a non-local ResNet's
affinity of a clicked point, DETR's boxes, a DINO's heads and the nearest images of a gallery
(IMAGE and two images of EXPECTED_DIR's parent folder) (seeded random weights: the same pictures on every
run), waits for the results, checks the DOM (five top-5 rows, the map canvases drawn, the boxes
listed, an error shown for a non-image) and compares screenshots with EXPECTED_DIR/*.png within
a tolerance, the device name and the timings hidden. --update writes the expectations; --docs
DIR writes the screenshots with the timings shown (docs/images). Exit 77 when chromium or this
build's `pagoda serve` is missing."""
import base64
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import urllib.request
import zlib

WIDTH, HEIGHT = 1200, 860
failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what)


# ---- a WebSocket client (RFC 6455), enough for the DevTools protocol ----------------------

class WebSocket:
    def __init__(self, url):
        assert url.startswith("ws://")
        host, _, path = url[5:].partition("/")
        name, _, port = host.partition(":")
        self.sock = socket.create_connection((name, int(port)), timeout=120)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall(("GET /%s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\n"
                           "Connection: Upgrade\r\nSec-WebSocket-Key: %s\r\n"
                           "Sec-WebSocket-Version: 13\r\n\r\n" % (path, host, key)).encode())
        head = b""
        while b"\r\n\r\n" not in head:
            part = self.sock.recv(4096)
            if not part:
                raise OSError("the browser closed the WebSocket handshake")
            head += part
        if b" 101 " not in head.split(b"\r\n")[0]:
            raise OSError("WebSocket handshake refused: %r" % head[:200])
        self.buf = head.split(b"\r\n\r\n", 1)[1]

    def send(self, text):
        data = text.encode()
        mask = os.urandom(4)
        n = len(data)
        head = bytes([0x81]) + (bytes([0x80 | n]) if n < 126 else
                                bytes([0x80 | 126]) + struct.pack(">H", n) if n < 65536 else
                                bytes([0x80 | 127]) + struct.pack(">Q", n))
        self.sock.sendall(head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(data)))

    def _read(self, n):
        while len(self.buf) < n:
            part = self.sock.recv(1 << 20)
            if not part:
                raise OSError("the browser closed the WebSocket")
            self.buf += part
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def recv(self):
        message = b""
        while True:
            b0, b1 = self._read(2)
            n = b1 & 0x7f
            if n == 126:
                n = struct.unpack(">H", self._read(2))[0]
            elif n == 127:
                n = struct.unpack(">Q", self._read(8))[0]
            payload = self._read(n)
            if b0 & 0x0f == 8:
                raise OSError("the browser closed the WebSocket")
            if b0 & 0x0f in (9, 10):
                continue  # ping, pong: DevTools sends none we must answer
            message += payload
            if b0 & 0x80:
                return message.decode()


class Page:
    def __init__(self, ws):
        self.ws, self.next = ws, 0

    def call(self, method, **params):
        self.next += 1
        self.ws.send(json.dumps({"id": self.next, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == self.next:
                if "error" in msg:
                    raise RuntimeError("%s: %s" % (method, msg["error"]))
                return msg["result"]

    def js(self, expr):
        r = self.call("Runtime.evaluate", expression=expr, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in r:
            raise RuntimeError("%s: %s" % (expr, r["exceptionDetails"]))
        return r["result"].get("value")

    def wait(self, expr, what, timeout=240):
        end = time.time() + timeout
        while time.time() < end:
            if self.js(expr):
                return True
            time.sleep(0.2)
        check(False, "waited %d s for %s" % (timeout, what))
        return False

    def screenshot(self):
        return base64.b64decode(self.call("Page.captureScreenshot", format="png")["data"])


# ---- PNG reading (Chromium's screenshots: 8-bit RGB or RGBA, not interlaced) ---------------

def png_pixels(data):
    pos, idat, w = 8, b"", 0
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h, depth, ctype, _, _, lace = struct.unpack(">IIBBBBB", body)
            assert depth == 8 and ctype in (2, 6) and lace == 0, "unexpected PNG"
            bpp = 3 if ctype == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    raw, stride = zlib.decompress(idat), w * bpp
    out, prev = bytearray(), bytearray(stride)
    for y in range(h):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        out += bytes(v for i, v in enumerate(line) if i % bpp < 3)
        prev = line
    return w, h, bytes(out)


def compare(name, shot, expected_dir, update, tmp):
    path = os.path.join(expected_dir, name + ".png")
    if update or not os.path.exists(path):
        with open(path, "wb") as f:
            f.write(shot)
        print("wrote " + path)
        return
    with open(path, "rb") as f:
        want = png_pixels(f.read())
    got = png_pixels(shot)
    if want[:2] != got[:2]:
        check(False, "%s: %dx%d, expected %dx%d" % (name, got[0], got[1], want[0], want[1]))
        return
    diff = [abs(a - b) for a, b in zip(got[2], want[2])]
    bad = sum(1 for i in range(0, len(diff), 3) if max(diff[i:i + 3]) > 48)
    share, mean = bad / (len(diff) / 3), sum(diff) / len(diff)
    ok = share < 0.01 and mean < 2.0
    if not ok:
        with open(os.path.join(tmp, name + "-actual.png"), "wb") as f:
            f.write(shot)
    check(ok, "%s: %.3f %% of the pixels differ, mean difference %.2f (tolerance 1 %%, 2.0)%s" %
          (name, 100 * share, mean, "" if ok else "; actual in " + tmp))


# ---- the page ---------------------------------------------------------------------------------

def start_chromium(profile):
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if not exe:
        print("skip: chromium not found (apt-get install chromium)")
        sys.exit(77)
    p = subprocess.Popen([exe, "--headless=new", "--no-sandbox", "--disable-gpu",
                          "--remote-debugging-port=0", "--user-data-dir=" + profile,
                          "--window-size=%d,%d" % (WIDTH, HEIGHT), "--hide-scrollbars",
                          "--force-device-scale-factor=1", "--font-render-hinting=none",
                          "--no-first-run", "--disable-extensions", "--disable-sync",
                          "--disable-background-networking", "--mute-audio",
                          "--use-fake-ui-for-media-stream", "--use-fake-device-for-media-stream",
                          "about:blank"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    port_file = os.path.join(profile, "DevToolsActivePort")
    for _ in range(600):
        if os.path.exists(port_file) and open(port_file).read().count("\n") >= 1:
            port = int(open(port_file).read().split()[0])
            targets = json.load(urllib.request.urlopen("http://127.0.0.1:%d/json/list" % port))
            pages = [t for t in targets if t["type"] == "page"]
            if pages:
                return p, Page(WebSocket(pages[0]["webSocketDebuggerUrl"]))
        time.sleep(0.1)
    p.kill()
    sys.exit("chromium did not open its DevTools port")


def choose(page, select, value):
    page.js("(() => { const s = document.getElementById('%s'); s.value = '%s';"
            " document.getElementById('status').textContent = '';"
            " s.dispatchEvent(new Event('change')); })()" % (select, value))


def upload(page, path):
    page.js("document.getElementById('status').textContent = ''")
    root = page.call("DOM.getDocument")["root"]["nodeId"]
    node = page.call("DOM.querySelector", nodeId=root, selector="#file")["nodeId"]
    page.call("DOM.setFileInputFiles", files=[os.path.abspath(path)], nodeId=node)


def done(page, what):
    return page.wait("document.getElementById('status').textContent === 'done' || "
                     "!document.getElementById('error').hidden", what)


def canvas_drawn(page, cid):
    """Whether the canvas is shown and holds more than one colour."""
    return page.js("(() => { const c = document.getElementById('%s');"
                   " if (!c || c.offsetParent === null) return false;"
                   " const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;"
                   " const s = new Set(); for (let i = 0; i < d.length; i += 400) s.add(d[i]);"
                   " return s.size > 8; })()" % cid)


def shoot(page, name, args):
    """The screenshot for the docs (timings shown), then the one compared (device and timings
    hidden: they change from machine to machine and run to run)."""
    if args["docs"]:
        with open(os.path.join(args["docs"], "serve-" + name + ".png"), "wb") as f:
            f.write(page.screenshot())
    page.js("for (const id of ['timings', 'device', 'status'])"
            " document.getElementById(id).style.visibility = 'hidden'")
    compare(name, page.screenshot(), args["expected"], args["update"], args["tmp"])
    page.js("for (const id of ['timings', 'device', 'status'])"
            " document.getElementById(id).style.visibility = ''")


def scenarios(page, url, args):
    page.call("Emulation.setDeviceMetricsOverride", width=WIDTH, height=HEIGHT,
              deviceScaleFactor=1, mobile=False)
    page.call("Page.navigate", url=url)
    page.wait("document.getElementById('model') && "
              "document.getElementById('model').options.length === 4", "the model list")
    check(not page.js("document.getElementById('note').hidden"),
          "the page says the weights are random and how to get real ones")
    # a ViT: top-5 and the two attention maps
    choose(page, "model", "random:vit_ti16")
    choose(page, "task", "maps")
    upload(page, args["image"])
    done(page, "the ViT's maps")
    rows = page.js("document.querySelectorAll('#top5 tbody tr').length")
    check(rows == 5, "ViT: %s top-5 rows" % rows)
    check(canvas_drawn(page, "view-a") and canvas_drawn(page, "view-b"),
          "ViT: the attention map and the rollout drawn")
    check("rollout" in page.js("document.getElementById('cap-b').textContent"), "ViT: captions")
    page.js("window.scrollTo(0, 0)")
    shoot(page, "vit-maps", args)
    # a non-local ResNet: the affinity of a clicked point
    choose(page, "model", "random:resnet50-nl")
    done(page, "the ResNet's classes")
    choose(page, "task", "affinity")
    done(page, "the ResNet's affinity")
    box = page.js("JSON.stringify(document.getElementById('view-image').getBoundingClientRect())")
    r = json.loads(box)
    page.js("document.getElementById('status').textContent = ''")
    for kind in ("mousePressed", "mouseReleased"):
        page.call("Input.dispatchMouseEvent", type=kind, x=r["x"] + r["width"] * 0.3,
                  y=r["y"] + r["height"] * 0.6, button="left", clickCount=1)
    done(page, "the affinity of the clicked point")
    q = page.js("JSON.stringify(state.result.affinity.query)")
    check(canvas_drawn(page, "view-a") and q != "[3,3]",
          "ResNet-NL: the affinity of the clicked point drawn (query %s)" % q)
    shoot(page, "resnet-affinity", args)
    # DETR: boxes, and an object's cross-attention on hover
    page.js("document.getElementById('threshold').value = '0.1'")
    choose(page, "model", "random:detr")
    done(page, "DETR's boxes")
    n = page.js("document.querySelectorAll('#boxes tbody tr').length")
    check(n and n > 0 and canvas_drawn(page, "view-a"), "DETR: %s objects listed, one's "
          "cross-attention drawn" % n)
    row = json.loads(page.js("JSON.stringify(document.querySelector('#boxes tbody tr:nth-child(2)')"
                             ".getBoundingClientRect())"))
    page.call("Input.dispatchMouseEvent", type="mouseMoved", x=row["x"] + 20, y=row["y"] + 5)
    page.wait("document.querySelector('#boxes tbody tr:nth-child(2)').classList.contains('active')",
              "the hovered object")
    shoot(page, "detr-boxes", args)
    # DINO: each head's attention, then the nearest images of the gallery
    choose(page, "model", "random:dino")
    done(page, "DINO's heads")
    n = page.js("document.querySelectorAll('#heads canvas').length")
    check(n == 6, "DINO: %s head maps" % n)
    page.js("window.scrollTo(0, 0)")
    shoot(page, "dino-heads", args)
    choose(page, "task", "nearest")
    done(page, "the nearest images")
    page.wait("[...document.querySelectorAll('#nearest img')].every(i => i.complete && "
              "i.naturalWidth > 0)", "the gallery's images")
    first = page.js("document.querySelector('#nearest figcaption').textContent")
    check(first.startswith("chelsea.jpg"), "DINO: the nearest image first: " + first)
    # (a CSS display once overrode the hidden attribute: the last task's heads stayed)
    check(page.js("document.getElementById('heads').offsetParent === null"),
          "DINO: the head maps hidden once the task is another")
    shoot(page, "dino-nearest", args)
    # the camera (Chromium's fake one): a picture taken goes through the same run
    choose(page, "model", "random:vit_ti16")
    done(page, "the ViT again")
    page.js("document.getElementById('camera').click()")
    page.wait("document.getElementById('video').videoWidth > 0", "the camera's picture")
    page.js("document.getElementById('status').textContent = '';"
            " document.getElementById('snap').click()")
    done(page, "the camera picture's run")
    w = page.js("state.result && state.result.image.width")
    check(w == page.js("document.getElementById('video').videoWidth"),
          "camera: the picture taken was run (%s pixels wide)" % w)
    page.js("document.getElementById('camera-off').click()")
    # a file that is no image: the error shown, the page still works
    bad = os.path.join(args["tmp"], "not-an-image.jpg")
    with open(bad, "w") as f:
        f.write("this is text\n")
    upload(page, bad)
    done(page, "the error")
    err = page.js("document.getElementById('error').textContent")
    check(err.startswith("415"), "a text file: the error shown (%s)" % err[:60])


def side_by_side(page, args):
    """A server on two devices ($PAGODA_SERVE_DEVICES, default the first one twice): the page
    runs the image on both (with --docs, its picture: not compared, the devices vary)."""
    devices = os.environ.get("PAGODA_SERVE_DEVICES", "0:0,0:0")
    server = subprocess.Popen([args["pagoda"], "serve", "--port", "0", "--device", devices,
                               "--models", "random:vit_ti16"], stdout=subprocess.PIPE, text=True)
    try:
        page.call("Page.navigate", url=server.stdout.readline().split(": ", 1)[1].strip())
        page.wait("document.getElementById('device-select') && "
                  "document.getElementById('device-select').options.length === 3",
                  "the two devices and 'all'")
        choose(page, "device-select", "all")
        upload(page, args["image"])
        done(page, "the runs on both devices")
        rows = page.js("document.querySelectorAll('#compare tbody tr').length")
        check(rows == 2, "devices side by side: %s rows" % rows)
        if args["docs"]:
            with open(os.path.join(args["docs"], "serve-devices.png"), "wb") as f:
                f.write(page.screenshot())
    finally:
        server.send_signal(signal.SIGTERM)
        check(server.wait(timeout=60) == 0, "the two-device server stopped cleanly")


def main():
    argv = sys.argv[1:]
    args = {"update": "--update" in argv, "docs": None}
    if "--docs" in argv:
        args["docs"] = argv[argv.index("--docs") + 1]
        argv.remove(args["docs"])
    argv = [a for a in argv if not a.startswith("--")]
    pagoda, args["image"], args["expected"] = argv[:3]
    args["pagoda"] = pagoda
    if subprocess.run([pagoda, "serve", "--help"], capture_output=True).returncode != 0:
        print("skip: this pagoda has no serve")
        sys.exit(77)
    if not (shutil.which("chromium") or shutil.which("chromium-browser")):
        print("skip: chromium not found (apt-get install chromium)")
        sys.exit(77)
    os.makedirs(args["expected"], exist_ok=True)
    args["tmp"] = tempfile.mkdtemp(prefix="serve-browser-", dir=os.environ.get("PAGODA_TEST_TMP"))
    gallery = os.path.join(args["tmp"], "gallery")
    os.makedirs(gallery)
    data = os.path.dirname(os.path.abspath(args["expected"]))
    for f in (args["image"], os.path.join(data, "grad_300x200.png"),
              os.path.join(data, "noise_97x143.png")):
        shutil.copy(f, gallery)
    server = subprocess.Popen([pagoda, "serve", "--port", "0", "--detr-side", "256", "--gallery",
                               gallery], stdout=subprocess.PIPE, text=True)
    line = server.stdout.readline()
    check(line.startswith("pagoda serve: http://"), "serve started: " + line.strip())
    browser = None
    try:
        browser, page = start_chromium(os.path.join(args["tmp"], "profile"))
        scenarios(page, line.split(": ", 1)[1].strip(), args)
        side_by_side(page, args)
    finally:
        if browser:
            browser.kill()
            browser.wait()
        server.send_signal(signal.SIGTERM)
        check(server.wait(timeout=60) == 0, "serve stopped cleanly")
    if failures:
        print("%d failed:\n  " % len(failures) + "\n  ".join(failures))
        sys.exit(1)
    shutil.rmtree(args["tmp"], ignore_errors=True)


if __name__ == "__main__":
    main()
