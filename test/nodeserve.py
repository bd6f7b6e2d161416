"""
nodeserve.py -- long-lived Node.js helpers of the test world: one process
per script and calling thread, a job a line in and an answer a line out,
kept for the next job instead of starting Node (and loading DuckDB or
icebird) for each.

A script served here runs `node SCRIPT --serve`, reads one JSON job a line
on stdin and answers each with one line, {"ok": output} or {"error":
text}, until its stdin closes (test/node/compact.mjs, icebird_count.mjs).

    nodeserve.run(script, job, timeout, error=RuntimeError)

returns the job's output, or raises `error` with the script's name and
why: the job's error (the server stays, usable), or the process died or
gave no answer within timeout seconds (it is killed, never reused).
Callers in several threads each get a server of their own; a forked child
starts its own.  Idle servers end when this process exits (their stdin
closes).  Rules: no sleeping; every wait is bounded by the caller's
timeout; nothing here talks to PostgreSQL.
"""

import atexit
import json
import os
import select
import subprocess
import tempfile
import threading

NODE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "node")


class _Server:
    """One `node SCRIPT --serve`.  It ends when its stdin closes, so also
    when this process dies."""

    def __init__(self, script):
        self.name = os.path.basename(script)
        self.err = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(["node", script, "--serve"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self.err, cwd=NODE_DIR)

    def run(self, job, timeout, error):
        """The job's output; error when it failed, when the process died,
        or after timeout seconds (the process is then killed)."""
        ready = True
        try:
            self.proc.stdin.write(json.dumps(job).encode() + b"\n")
            self.proc.stdin.flush()
            ready = bool(select.select([self.proc.stdout], [], [], timeout)[0])
            line = self.proc.stdout.readline() if ready else b""
        except OSError:            # it is gone (a broken pipe)
            line = b""
        if not line:
            self.proc.kill()
            self.err.seek(0)
            why = "no answer in %d s" % timeout if not ready else \
                self.err.read()[-3000:].decode(errors="replace")
            self.stop()
            why = why or "it ended with status %s" % self.proc.returncode
            raise error("%s failed: %s" % (self.name, why))
        answer = json.loads(line)
        if "error" in answer:
            raise error("%s failed: %s" % (self.name, answer["error"][-3000:]))
        return answer["ok"]

    def stop(self):
        """End it: an idle server ends when its stdin closes; one that is
        not idle (it timed out) is killed."""
        try:
            self.proc.stdin.close()
            self.proc.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()
        self.err.close()


_idle = {}                 # script -> servers of this process waiting for a job
_lock = threading.Lock()
_pid = None


def _stop_all():
    with _lock:
        for servers in _idle.values():
            while servers:
                servers.pop().stop()


atexit.register(_stop_all)


def run(script, job, timeout=300, error=RuntimeError):
    """Run script on job (a dict); returns its output (see the module)."""
    global _pid
    with _lock:
        if _pid != os.getpid():         # a forked child does not share them
            _idle.clear()
            _pid = os.getpid()
        servers = _idle.setdefault(script, [])
        srv = servers.pop() if servers else None
    srv = srv or _Server(script)
    try:
        out = srv.run(job, timeout, error)
    except error:
        if srv.proc.poll() is None:      # a failed job leaves the server usable
            with _lock:
                _idle.setdefault(script, []).append(srv)
        raise
    with _lock:
        _idle.setdefault(script, []).append(srv)
    return out
