"""The openai4s kernel: a persistent Python interpreter that runs cells like a notebook.

Started by the worker as `python3 -u -c <this source> MAX_CHARS`. State (variables, imports,
functions) survives from one cell to the next. For each cell it returns what the code printed
to stdout and stderr, the repr() of the value of a final expression, and the traceback of an
error. The kernel survives the cell's errors, KeyboardInterrupt and SystemExit alike.

Protocol, private to the worker: one JSON object per line.
  in  (the original fd 0): {"id": N, "code": "..."}
  out (the original fd 1): {"id": N, "status": "OK"|"ERROR", "output": str, "stderr": str,
                            "value": str|null, "error": str|null}
Before any user code runs, fd 0 is re-pointed at /dev/null and fd 1 at stderr, and the
protocol keeps private duplicates: neither the user's code nor a subprocess it starts can read
the next request or print into a reply. Python-level output is captured per cell into capped
buffers, so a cell printing gigabytes costs MAX_CHARS of memory, not gigabytes.

SIGINT interrupts a running cell (KeyboardInterrupt, reported as an ERROR) and is ignored
while the kernel is idle, so an interrupt that arrives just after a cell finished cannot kill
the kernel or land in the next cell. End of input (the worker is gone) ends the kernel.
"""

import ast
import builtins
import io
import json
import linecache
import os
import signal
import sys
import traceback
import types


class CappedText(io.TextIOBase):
    """A text sink that keeps the first `limit` characters and counts the rest."""

    encoding = "utf-8"

    def __init__(self, limit):
        super().__init__()
        self._limit = limit
        self._parts = []
        self._kept = 0
        self._dropped = 0

    def writable(self):
        return True

    def write(self, text):
        if not isinstance(text, str):
            raise TypeError("write() argument must be str, not " + type(text).__name__)
        room = self._limit - self._kept
        if room > 0:
            piece = text[:room]
            self._parts.append(piece)
            self._kept += len(piece)
        self._dropped += max(0, len(text) - max(room, 0))
        return len(text)

    def getvalue(self):
        text = "".join(self._parts)
        if self._dropped:
            text += "\n[... %d more characters not shown]" % self._dropped
        return text


def cap(text, limit):
    if len(text) <= limit:
        return text
    return text[:limit] + "\n[... %d more characters not shown]" % (len(text) - limit)


def time_remaining():
    """Seconds left before the job's time limit (OPENAI4S_DEADLINE), or None without one."""
    deadline = os.environ.get("OPENAI4S_DEADLINE", "")
    return max(0, int(deadline) - int(__import__("time").time())) if deadline.isdigit() else None


class Kernel:
    def __init__(self, limit):
        self.limit = limit
        self.cells = 0
        self.running = False
        module = types.ModuleType("__main__")
        module.__dict__["__builtins__"] = builtins
        module.__dict__["time_remaining"] = time_remaining
        # User code lives in a real __main__, so pickling and multiprocessing find its names.
        sys.modules["__main__"] = module
        self.namespace = module.__dict__

    def on_sigint(self, signum, frame):
        if self.running:
            raise KeyboardInterrupt

    def format_error(self, error, filename):
        tb = error.__traceback__
        # Drop the kernel's own frames: the user's traceback starts in their cell.
        while tb is not None and tb.tb_frame.f_code.co_filename != filename:
            tb = tb.tb_next
        # ... and an interrupt ends where the user's code was, not in our signal handler.
        previous, current = None, tb
        while current is not None:
            if current.tb_frame.f_code is Kernel.on_sigint.__code__:
                if previous is None:
                    tb = None
                else:
                    previous.tb_next = None
                break
            previous, current = current, current.tb_next
        return "".join(traceback.format_exception(type(error), error, tb))

    def run(self, code):
        self.cells += 1
        filename = "<cell-%d>" % self.cells
        # Registered so tracebacks show the offending source lines.
        linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
        out, err = CappedText(self.limit), CappedText(self.limit)
        status, value, error = "OK", None, None
        saved = sys.stdout, sys.stderr
        sys.stdout, sys.stderr = out, err
        try:
            try:
                tree = ast.parse(code, filename, "exec")
                last = None
                if tree.body and isinstance(tree.body[-1], ast.Expr):
                    last = ast.Expression(tree.body.pop().value)
                body = compile(tree, filename, "exec")
                tail = compile(last, filename, "eval") if last is not None else None
                self.running = True
                exec(body, self.namespace)
                result = eval(tail, self.namespace) if tail is not None else None
                self.running = False
                if result is not None:
                    self.namespace["_"] = result
                    value = cap(repr(result), self.limit)
            except BaseException as caught:  # the kernel outlives every cell
                self.running = False
                status = "ERROR"
                error = cap(self.format_error(caught, filename), self.limit)
        finally:
            self.running = False
            sys.stdout, sys.stderr = saved
        return {
            "status": status,
            "output": out.getvalue(),
            "stderr": err.getvalue(),
            "value": value,
            "error": error,
        }


def main():
    limit = int(sys.argv[1]) if len(sys.argv) > 1 else 200000
    requests = os.fdopen(os.dup(0), "rb")
    replies = os.fdopen(os.dup(1), "wb")
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(2, 1)
    kernel = Kernel(limit)
    pid = os.getpid()
    signal.signal(signal.SIGINT, kernel.on_sigint)
    while True:
        try:
            line = requests.readline()
        except KeyboardInterrupt:
            continue
        if not line:
            return
        request = json.loads(line)
        reply = kernel.run(request["code"])
        if os.getpid() != pid:
            # The child of a cell's os.fork() came back here: were it to answer, it would
            # reply in the parent's place and then serve every later cell from a copy of the
            # state while the real kernel waits for it. It ends silently, as a forked child
            # of multiprocessing does.
            os._exit(0)
        reply["id"] = request["id"]
        replies.write(json.dumps(reply, ensure_ascii=False).encode("utf-8", "replace") + b"\n")
        replies.flush()


main()
