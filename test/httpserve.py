"""
httpserve.py -- the HTTP scaffolding the test world's servers share: the
REST catalog (test/catalog/server.py), the engine look-alikes
(test/engines/server.py) and the S3 gate (test/s3gate/server.py).

    class Handler(httpserve.Handler):
        log_prefix = "catalog"              # --verbose lines "catalog: ..."
        def do_GET(self):
            body = self.read_body()         # Content-Length bytes, b"" without
            self.reply(200, data, {"ETag": x}, "application/xml")
            self.reply_json(200, {"k": "v"}) / self.reply_error(404, "no such route")

    server = httpserve.Server(port, Handler, verbose=args.verbose)   # port 0: any
    server.thing = ...                      # what the handlers read
    httpserve.serve(server, "catalog", on_stop=None)
    httpserve.serve_processes(server, "catalog", n, before_fork=None)

serve() prints "<name> listening on http://127.0.0.1:PORT" (world.py waits
for that line) once the server accepts connections, serves until SIGTERM or
SIGINT (on_stop runs first, in the signal handler: release what requests
wait on), and closes the socket.

Rules: 127.0.0.1 only; a thread per connection, daemon threads (a hanging
request never holds the process up at exit); HTTP/1.1 keep-alive, Nagle's
algorithm off (a body over 64 KB leaves in a write after the head's: with
Nagle it would wait for the client's delayed ACK, ~40 ms an answer); every
answer carries Content-Length; a client gone before its answer is complete
closes the connection quietly.  Only the Python standard library.

A handler may set MessageClass = httpserve.Headers: its request headers
are then read by a plain line parser (the same lines, limits and errors
as http.client's) instead of the email package's, about a tenth of the
CPU: the header parsing was half of what the catalog spent on a 304.  Its
usual request line ("METHOD PATH HTTP/1.1") is then parsed by a short way
too (parse_request; anything else by BaseHTTPRequestHandler's).
"""

import email.utils
import http.client
import json
import mmap
import os
import re
import signal
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HOST = "127.0.0.1"

# a header field's line: its name up to the first colon, its value
_FIELD = re.compile(r"^([^:\n]*):(.*)$", re.M)


class Headers:
    """A request's header fields, in the part of email.message.Message's
    interface the servers use: get (the first field of that name, any
    case), get_all, [] (None when absent), in, items, keys, values, len,
    iteration over the names.  Names keep their case; values have no
    leading or trailing white space (obsolete line folding is joined
    with one space)."""

    __slots__ = ("_fields", "_first")

    def __init__(self, fields=()):
        self._fields = list(fields)
        # the first value of each name, by its lower-case form: get() is a
        # dict look-up (a request's log entry alone asks for six names)
        first = {}
        for k, v in reversed(self._fields):
            first[k.lower()] = v
        self._first = first

    @classmethod
    def read(cls, fp):
        """The fields up to the empty line, from a binary file; raises
        http.client.LineTooLong and HTTPException ("got more than 100
        headers") as http.client.parse_headers does."""
        readline = fp.readline
        maxline = http.client._MAXLINE
        maxheaders = http.client._MAXHEADERS
        lines = []
        while True:
            line = readline(maxline + 1)
            if len(line) > maxline:
                raise http.client.LineTooLong("header line")
            if line in (b"\r\n", b"\n", b""):
                break
            lines.append(line)
            if len(lines) > maxheaders:
                raise http.client.HTTPException("got more than %d headers" % maxheaders)
        block = b"".join(lines).decode("iso-8859-1")
        h = cls.__new__(cls)
        if block[:1] in (" ", "\t") or "\n " in block or "\n\t" in block:
            h._fields = cls._folded(lines)
        else:
            # every "name: value" line at once (a line without a colon is
            # not a field); the usual request has no folded line
            h._fields = [(n.strip(), v.strip()) for n, v in _FIELD.findall(block)]
        h._first = {k.lower(): v for k, v in reversed(h._fields)}
        return h

    @staticmethod
    def _folded(lines):
        """The fields of lines where some continue the one before
        (obsolete line folding: joined to it with one space)."""
        fields = []
        for line in lines:
            if line[0] in (32, 9) and fields:
                name, value = fields[-1]
                fields[-1] = (name, (value + " " + line.decode("iso-8859-1").strip()).strip())
                continue
            name, sep, value = line.partition(b":")
            if sep:
                fields.append((name.decode("iso-8859-1").strip(),
                               value.decode("iso-8859-1").strip()))
        return fields

    def get(self, name, failobj=None):
        return self._first.get(name.lower(), failobj)

    def lowered(self):
        """{lower-case name: its first value}, to be read, not changed."""
        return self._first

    def get_all(self, name, failobj=None):
        name = name.lower()
        found = [v for k, v in self._fields if k.lower() == name]
        return found or failobj

    def __getitem__(self, name):
        return self.get(name)

    def __contains__(self, name):
        return name.lower() in self._first

    def items(self):
        return list(self._fields)

    def keys(self):
        return [k for k, _ in self._fields]

    def values(self):
        return [v for _, v in self._fields]

    def __iter__(self):
        return iter(self.keys())

    def __len__(self):
        return len(self._fields)

    def __str__(self):
        return "".join("%s: %s\r\n" % f for f in self._fields) + "\r\n"


_parse_headers = http.client.parse_headers


def _parse_headers_of(fp, _class=http.client.HTTPMessage):
    """http.client.parse_headers, but Headers for a handler that asks for
    them (BaseHTTPRequestHandler.parse_request passes its MessageClass);
    every other caller gets http.client's own."""
    if _class is Headers:
        return Headers.read(fp)
    return _parse_headers(fp, _class)


http.client.parse_headers = _parse_headers_of


class Handler(BaseHTTPRequestHandler):
    """The handler base: keep-alive, no Nagle, verbose logging, replies."""

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    # the prefix of the request log lines written with the server's verbose
    log_prefix = "server"
    # Server and Date headers on every answer; off for a proxy passing its
    # upstream's own
    server_headers = True

    _date = (None, None)

    def date_time_string(self, timestamp=None):
        """The Date header's value, formatted once a second."""
        if timestamp is not None:
            return email.utils.formatdate(timestamp, usegmt=True)
        now = int(time.time())
        second, text = Handler._date
        if second != now:
            text = email.utils.formatdate(now, usegmt=True)
            Handler._date = (now, text)
        return text

    def version_string(self):
        """The Server header's value, formatted once per handler class."""
        cls = type(self)
        text = cls.__dict__.get("_version_text")
        if text is None:
            text = BaseHTTPRequestHandler.version_string(self)
            cls._version_text = text
        return text

    def parse_request(self):
        """BaseHTTPRequestHandler.parse_request, with a short way for the
        usual request line ("METHOD PATH HTTP/1.1") when the handler reads
        its headers with Headers: the same fields, errors, keep-alive and
        Expect: 100-continue rules.  Anything else goes the long way."""
        if self.MessageClass is not Headers or self.protocol_version != "HTTP/1.1":
            return super().parse_request()
        line = str(self.raw_requestline, "iso-8859-1").rstrip("\r\n")
        words = line.split()
        if len(words) != 3 or words[2] != "HTTP/1.1":
            return super().parse_request()
        self.requestline = line
        self.command, path, self.request_version = words
        if path.startswith("//"):
            path = "/" + path.lstrip("/")      # as the base class does (gh-87389)
        self.path = path
        self.close_connection = False
        try:
            self.headers = headers = Headers.read(self.rfile)
        except http.client.LineTooLong as err:
            self.send_error(431, "Line too long", str(err))
            return False
        except http.client.HTTPException as err:
            self.send_error(431, "Too many headers", str(err))
            return False
        conntype = headers.get("Connection")
        if conntype is not None:
            if conntype.lower() == "close":
                self.close_connection = True
            elif conntype.lower() == "keep-alive":
                self.close_connection = False
        expect = headers.get("Expect")
        if expect is not None and expect.lower() == "100-continue":
            if not self.handle_expect_100():
                return False
        return True

    def log_request(self, code="-", size="-"):
        if getattr(self.server, "verbose", False):
            super().log_request(code, size)

    def log_message(self, fmt, *args):
        if getattr(self.server, "verbose", False):
            sys.stderr.write("%s: %s\n" % (self.log_prefix, fmt % args))

    def read_body(self):
        """The request body (Content-Length bytes; b"" without one)."""
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def reply(self, status, data=b"", headers=None, content_type=None, content_length=None):
        """Answer: the status line, Content-Type content_type (unless None or
        headers name one), headers, Content-Length (len(data), or
        content_length: a HEAD answer's length of the body it does not
        send), then data unless the request is a HEAD.  The head is
        formatted in one string and sent with a body of up to
        ONE_WRITE bytes in one write (what send_response, send_header and
        end_headers would send, in one system call instead of several)."""
        headers = headers or {}
        if self.request_version == "HTTP/0.9" or getattr(self, "_headers_buffer", None):
            return self._reply_buffered(status, data, dict(headers), content_type,
                                        content_length)
        try:
            phrase = self.responses.get(status)
            head = ["%s %d %s\r\n" % (self.protocol_version, status,
                                       phrase[0] if phrase else "")]
            if self.server_headers:
                self.log_request(status)
                head.append("Server: %s\r\nDate: %s\r\n"
                            % (self.version_string(), self.date_time_string()))
            if content_type is not None and \
                    not any(k.lower() == "content-type" for k in headers):
                head.append("Content-Type: %s\r\n" % content_type)
            for k, v in headers.items():
                head.append("%s: %s\r\n" % (k, v))
                if k.lower() == "connection":
                    if v.lower() == "close":
                        self.close_connection = True
                    elif v.lower() == "keep-alive":
                        self.close_connection = False
            head.append("Content-Length: %s\r\n\r\n"
                        % (len(data) if content_length is None else content_length))
            out = "".join(head).encode("latin-1", "strict")
            if not data or self.command == "HEAD":
                self.wfile.write(out)
            elif len(data) <= self.ONE_WRITE:
                self.wfile.write(out + data)
            else:
                self.wfile.write(out)
                self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            # the client gave up (a timeout, a response over its limit)
            self.close_connection = True

    # bodies up to this size leave with their head in one write
    ONE_WRITE = 65536

    def _reply_buffered(self, status, data, headers, content_type, content_length):
        """reply() through send_response, send_header and end_headers (an
        HTTP/0.9 request, or headers already buffered by the handler)."""
        try:
            if self.server_headers:
                self.send_response(status)
            else:
                self.send_response_only(status)
            if content_type is not None and \
                    not any(k.lower() == "content-type" for k in headers):
                self.send_header("Content-Type", content_type)
            for k, v in headers.items():
                self.send_header(k, v)
            self.send_header("Content-Length",
                             str(len(data) if content_length is None else content_length))
            self.end_headers()
            if data and self.command != "HEAD":
                self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            # the client gave up (a timeout, a response over its limit)
            self.close_connection = True

    def reply_json(self, status, obj=None, headers=None):
        """Answer with obj as JSON (an empty body when obj is None)."""
        self.reply(status, json.dumps(obj).encode() if obj is not None else b"", headers,
                   "application/json")

    def reply_error(self, status, message):
        """Answer {"error": message}, the admin endpoints' error shape."""
        self.reply_json(status, {"error": message})


class Server(ThreadingHTTPServer):
    """A threaded HTTP server on 127.0.0.1:port (0: a free port, see
    .port); verbose turns the handlers' request log on."""

    daemon_threads = True
    allow_reuse_address = True
    # pre-forked (serve_processes): how many processes serve the port, the
    # other children's private ports (None: this is a private port, or
    # one process), and (shared counts, this child's index)
    processes = 1
    siblings = None
    balance = None
    # polls a busier child lets a new connection wait for a less busy one
    MAX_DEFERRALS = 20

    def __init__(self, port, handler, verbose=False):
        super().__init__((HOST, port), handler)
        self.verbose = verbose
        self._deferred = 0
        self._open_lock = threading.Lock()

    @property
    def port(self):
        return self.server_address[1]

    def _handle_request_noblock(self):
        b = self.balance
        if b is not None:
            counts, me = b
            if counts[me] > min(counts) and self._deferred < self.MAX_DEFERRALS:
                # a less busy child is woken by the same connection
                self._deferred += 1
                time.sleep(0.001)
                return
            self._deferred = 0
        super()._handle_request_noblock()

    def _count_open(self, delta):
        b = self.balance
        if b is not None:
            with self._open_lock:
                b[0][b[1]] += delta

    def process_request(self, request, client_address):
        self._count_open(1)
        try:
            super().process_request(request, client_address)
        except Exception:
            self._count_open(-1)
            raise

    def process_request_thread(self, request, client_address):
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._count_open(-1)


def serve(server, name, on_stop=None):
    """Announce, serve until SIGTERM/SIGINT, close (see the module comment)."""
    def stop(signum, frame):
        if on_stop is not None:
            on_stop()
        # shutdown() waits for serve_forever(), which runs on this thread
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    print("%s listening on http://%s:%d" % (name, HOST, server.port), flush=True)
    try:
        server.serve_forever(poll_interval=0.2)
    finally:
        server.server_close()


def serve_processes(server, name, n, before_fork=None):
    """Serve server's socket from n pre-forked processes (see the module
    comment); before_fork() runs in the parent first (close connections
    a child must not share).  Returns the exit status: 0 after
    SIGTERM/SIGINT, 1 when a child died on its own."""
    cls = type(server)
    privates = [cls(0, server.RequestHandlerClass, verbose=server.verbose) for _ in range(n)]
    counts = memoryview(mmap.mmap(-1, 8 * n)).cast("q")
    if before_fork is not None:
        before_fork()
    sys.stdout.flush()
    sys.stderr.flush()
    pids = []
    for i in range(n):
        pid = os.fork()
        if pid == 0:
            _child(server, privates, i, counts)     # never returns
        pids.append(pid)
    for p in privates:
        p.server_close()
    server.server_close()
    stopping = []

    def stop(signum, frame):
        stopping.append(signum)
        for pid in pids:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    print("%s listening on http://%s:%d (%d processes)" % (name, HOST, server.port, n),
          flush=True)
    status = 0
    live = set(pids)
    while live:
        try:
            pid, _ = os.wait()
        except ChildProcessError:
            break
        except InterruptedError:
            continue
        live.discard(pid)
        if not stopping:
            sys.stderr.write("%s: serving process %d exited; stopping\n" % (name, pid))
            status = 1
            stop(None, None)
    return status


def _child(server, privates, i, counts):
    """A pre-forked child: serve the shared socket and privates[i]."""
    try:
        private = privates[i]
        for j, p in enumerate(privates):
            if j != i:
                p.server_close()
        for k, v in server.__dict__.items():
            private.__dict__.setdefault(k, v)
        server.processes = private.processes = len(privates)
        server.siblings = [p.port for j, p in enumerate(privates) if j != i]
        private.siblings = None
        server.socket.setblocking(False)    # a sibling may take the connection first
        server.balance = (counts, i)

        def stop(signum, frame):
            for s in (server, private):
                threading.Thread(target=s.shutdown, daemon=True).start()

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        t = threading.Thread(target=private.serve_forever, kwargs={"poll_interval": 0.2},
                             daemon=True)
        t.start()
        server.serve_forever(poll_interval=0.2)
        t.join(5)
        code = 0
    except BaseException:
        import traceback
        traceback.print_exc()
        code = 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(code)
