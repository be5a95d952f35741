"""The openai4s kernel: a persistent Python interpreter that runs cells like a notebook.

Started by the worker as `python3 -u -c <this source> MAX_CHARS MAX_MIME_CHARS`. State
(variables, imports, functions) survives from one cell to the next. The kernel survives the
cell's errors, KeyboardInterrupt and SystemExit alike.

Protocol, private to the worker: one JSON object per line.
  in  (the original fd 0): {"id": N, "code": "..."}
  out (the original fd 1), while cell N runs, in the order they happen:
      {"id": N, "event": {"type": "stream", "name": "stdout"|"stderr", "text": str}}
      {"id": N, "event": {"type": "display_data", "data": {MIME: str, ...}}}
      {"id": N, "started": true}   once, when a SIGINT starts to interrupt the cell (below)
    and then, once:
      {"id": N, "reply": {"status": "OK"|"ERROR",
                          "result": {MIME: str, ...} | null,     # the last expression
                          "error": {"ename", "evalue", "traceback"} | null}}
  out, while no cell runs (a thread the last cell started prints, a widget changes):
      {"idle": M, "event": {...}}   M: the last cell's id (0 before the first)
The shapes are Jupyter's (stream, display_data, execute_result, error) so that a Jupyter
client maps onto them one to one. A bundle always has "text/plain"; "text/html",
"application/json" (JSON text), "image/png" (base64) are added when the object provides them
(_repr_html_, _repr_json_, _repr_png_; matplotlib figures through its Agg backend). A value
over MAX_MIME_CHARS is left out and "text/plain" says so.

Before any user code runs, fd 0 is re-pointed at /dev/null and fd 1 at stderr, and the
protocol keeps private duplicates: neither the user's code nor a subprocess it starts can read
the next request or print into a reply. Python-level output is streamed as it is written, and
capped per cell (MAX_CHARS per stream: its first and last halves, see HeadTail), so a cell
printing gigabytes costs MAX_CHARS.

sys.stdout and sys.stderr are one pair of Stream objects for the kernel's whole life (as
ipykernel's), not one per cell: a thread a cell started, or a logging handler it made, keeps
writing into them after the cell ended, and that output goes out as "idle" lines (capped at
MAX_CHARS between two cells) instead of into the job log. Which of the two a write becomes is
decided under one lock with the reply's place in the queue, so no line of cell N can follow
its reply. flush() waits until the writer thread wrote everything before it: a
`print(..., flush=True)` right before os._exit() reaches the worker.

Only one thread writes the protocol (the writer thread, fed by a queue). SIGINT raises
KeyboardInterrupt in the main thread between any two bytecodes; were the main thread to write
protocol lines itself, an interrupt could cut one in half and desynchronise the worker.

SIGINT interrupts a running cell (KeyboardInterrupt, reported as an ERROR) and is ignored
while the kernel is idle, so an interrupt that arrives just after a cell finished cannot kill
the kernel or land in the next cell. Because of that, a SIGINT sent after the worker wrote a
request but before the cell began would be lost; the worker holds an interrupt back until the
cell's "started" line. End of input (the worker is gone) ends the kernel.
"""

import ast
import base64
import builtins
import collections
import io
import json
import linecache
import os
import queue
import signal
import sys
import threading
import traceback
import types
import warnings

# Figures render off-screen. Set before the user's code can import matplotlib; an explicit
# choice in the environment wins.
os.environ.setdefault("MPLBACKEND", "Agg")

# One protocol line carries at most this many characters of stream text: a cell that printed
# its whole cap at once still fits the worker's frame cap after JSON escaping.
STREAM_CHUNK_CHARS = 32 * 1024
# display() calls kept per cell: a loop displaying forever must not flood the channel.
MAX_DISPLAYS = 100


def cap(text, limit):
    if len(text) <= limit:
        return text
    return text[:limit] + "\n[... %d more characters not shown]" % (len(text) - limit)


class Writer:
    """The only writer of protocol lines: a daemon thread draining a queue (see the top)."""

    def __init__(self, replies):
        self._replies = replies
        self._queue = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="openai4s-protocol", daemon=True)
        self._thread.start()

    def put(self, message):
        self._queue.put(message)

    def flush(self, timeout=10.0):
        """Returns once everything put before it is written (or after `timeout` s, so a worker
        that stopped reading cannot hang the cell's flush() forever)."""
        if threading.current_thread() is self._thread or not self._thread.is_alive():
            # The writer itself, or the child of a cell's os.fork(), where no writer thread
            # survived: waiting would cost every flush (multiprocessing flushes at exit) 10 s.
            return
        done = threading.Event()
        self._queue.put(done)
        done.wait(timeout)

    def _run(self):
        while True:
            batch = [self._queue.get()]
            # Everything queued meanwhile goes out in one write; consecutive text of one stream
            # is merged, so a tight print loop costs a few lines, not one per print.
            while True:
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            flushed = [m for m in batch if isinstance(m, threading.Event)]
            lines = []
            for message in merge([m for m in batch if not isinstance(m, threading.Event)]):
                lines.append(json.dumps(message, ensure_ascii=False).encode("utf-8", "replace"))
            if lines:
                self._replies.write(b"\n".join(lines) + b"\n")
                self._replies.flush()
            for done in flushed:
                done.set()


def merge(batch):
    merged = []
    for message in batch:
        last = merged[-1] if merged else None
        event = message.get("event")
        if (
            last is not None
            and event is not None
            and event["type"] == "stream"
            and last.get("id") == message.get("id")
            and last.get("idle") == message.get("idle")
            and last.get("event", {}).get("type") == "stream"
            and last["event"]["name"] == event["name"]
            and len(last["event"]["text"]) + len(event["text"]) <= STREAM_CHUNK_CHARS
        ):
            last["event"] = dict(last["event"], text=last["event"]["text"] + event["text"])
        else:
            merged.append(message)
    return merged


OUTPUT_DIR = "openai4s-outputs"

# One cell's whole output file stops here: `while True: print(...)` must not fill the disk
# the workspace shares with everyone's jobs.
MAX_SPILL_CHARS = 1 << 30


def open_spill(workspace, name):
    """A new file for a cell's whole output, in OUTPUT_DIR of the workspace: (file, its path
    relative to the workspace), or (None, why not). Written here, inside the sandbox as the
    job's own user, never by the daemon; a link planted at the name is not followed."""
    try:
        directory = os.path.join(workspace, OUTPUT_DIR)
        os.makedirs(directory, exist_ok=True)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(os.path.join(directory, name), flags, 0o666)
        return os.fdopen(fd, "w", encoding="utf-8", errors="replace"), OUTPUT_DIR + "/" + name
    except OSError as error:
        return None, str(error)


class HeadTail:
    """One stream's cap in a cell: the first half of `limit` characters go out as written;
    past it one line says so at once (while the cell runs, not after), the middle is left out,
    and the last half is kept and sent when the cell ends. The end of a long output (the
    final loss, the summary) is the part a scientist needs: it must not be the part dropped.

    Nothing is lost either: past the cap the whole output (head included) is written to a
    file in the workspace as it streams (`spill` opens it), and both notes name that file, so
    the scientist downloads the 10 MB a cell printed instead of 2 % of it. Memory stays
    bounded: the head (until the file opens) and the tail, never the middle.
    """

    def __init__(self, limit, spill=None):
        self.head = limit - limit // 2
        self.tail_limit = limit // 2
        self.passed = 0
        self.tail = collections.deque()
        self.tail_chars = 0
        self.dropped = 0
        self.cutting = False
        self.spill = spill
        self.head_text = []
        self.file = None
        self.where = None
        self.spilled = 0

    def _open(self):
        """Opens the whole output's file and writes the head to it; the note's words."""
        if self.spill is None:
            return ""
        self.file, found = self.spill()
        if self.file is None:
            return " (the whole output could not be kept: %s)" % found
        self.where = found
        self._write("".join(self.head_text))
        return "; the whole output goes to %s" % found

    def _write(self, text):
        room = MAX_SPILL_CHARS - self.spilled
        try:
            self.file.write(text[:room])
            self.spilled += min(len(text), room)
            if len(text) > room:
                self.file.write("\n[... openai4s: this file stops at %d characters]\n" % MAX_SPILL_CHARS)
                self._lost("over %d characters" % MAX_SPILL_CHARS)
        except OSError as error:
            self._lost(error)

    def flush(self):
        """What the cell wrote so far reaches the file (a flush of the stream, print(flush=True))."""
        if self.file is not None:
            try:
                self.file.flush()
            except OSError as error:
                self._lost(error)

    def _lost(self, error):
        try:
            self.file.close()
        except OSError:
            pass
        self.file = None
        self.where = "%s (incomplete: %s)" % (self.where, error)

    def take(self, text):
        """(what of `text` goes out now, the note that cutting began or None)."""
        now = text[: max(self.head - self.passed, 0)]
        self.passed += len(now)
        rest = text[len(now) :]
        if not rest:
            if now and self.spill is not None:
                self.head_text.append(now)
            return now, None
        note = None
        if not self.cutting:
            self.cutting = True
            if now and self.spill is not None:
                self.head_text.append(now)
            kept = self._open()
            self.head_text = []
            note = (
                "\n[... output over %d characters%s: the middle is left out here; its last %d characters follow when the cell ends]\n"
                % (self.head, kept, self.tail_limit)
            )
        if self.file is not None:
            self._write(rest)
        self.tail.append(rest)
        self.tail_chars += len(rest)
        while self.tail_chars > self.tail_limit:
            first = self.tail[0]
            excess = self.tail_chars - self.tail_limit
            if len(first) <= excess:
                self.tail.popleft()
                cut = len(first)
            else:
                self.tail[0] = first[excess:]
                cut = excess
            self.tail_chars -= cut
            self.dropped += cut
        return now, note

    def end(self):
        """The kept tail, after a line counting what was left out; None when nothing was cut."""
        if not self.cutting:
            return None
        whole = ""
        if self.file is not None:
            try:
                self.file.close()
            except OSError as error:
                self.where = "%s (incomplete: %s)" % (self.where, error)
            self.file = None
        if self.where is not None:
            whole = "; the whole output is in %s" % self.where
        return "\n[... %d more characters not shown%s]\n%s" % (self.dropped, whole, "".join(self.tail))


class Stream(io.TextIOBase):
    """sys.stdout / sys.stderr: sends what is written, up to `limit` characters per cell
    (and per stretch between two cells, see Kernel.idle_write).

    A TextIOBase, as the real streams are: libraries probe for fileno() (which says
    UnsupportedOperation here), isatty(), encoding.
    """

    encoding = "utf-8"

    def __init__(self, kernel, name):
        super().__init__()
        self._kernel = kernel
        self._name = name
        self._cap = HeadTail(kernel.limit)

    def writable(self):
        return True

    def isatty(self):
        return False

    def flush(self):
        with self._kernel.lock:
            self._cap.flush()
        self._kernel.writer.flush()

    def write(self, text):
        if not isinstance(text, str):
            raise TypeError("write() argument must be str, not " + type(text).__name__)
        with self._kernel.lock:
            if self._kernel.cell_id is None:
                self._kernel.idle_write(self._name, text)
                return len(text)
            now, note = self._cap.take(text)
            self._send(now)
            if note is not None:
                self._send(note)
        return len(text)

    def open_cell(self):
        self._cap = HeadTail(self._kernel.cell_limit, self._spill)

    def _spill(self):
        return self._kernel.spill_file(self._name)

    def _send(self, piece):
        for i in range(0, len(piece), STREAM_CHUNK_CHARS):
            self._kernel.emit({"type": "stream", "name": self._name, "text": piece[i : i + STREAM_CHUNK_CHARS]})

    def close_cell(self):
        with self._kernel.lock:
            rest = self._cap.end()
            if rest is not None:
                self._send(rest)
            self._cap = HeadTail(self._kernel.limit)


def figure_png(obj):
    """PNG bytes of a matplotlib figure, or None when `obj` is not one."""
    figure_module = sys.modules.get("matplotlib.figure")
    if figure_module is None or not isinstance(obj, figure_module.Figure):
        return None
    buffer = io.BytesIO()
    obj.savefig(buffer, format="png", bbox_inches="tight")
    return buffer.getvalue()


def time_remaining():
    """Seconds left before the job's time limit (OPENAI4S_DEADLINE), or None without one."""
    deadline = os.environ.get("OPENAI4S_DEADLINE", "")
    return max(0, int(deadline) - int(__import__("time").time())) if deadline.isdigit() else None


class Kernel:
    def __init__(self, limit, mime_limit, writer):
        self.limit = limit
        # The running cell's cap: the client may lower it for one cell, never raise it.
        self.cell_limit = limit
        self.mime_limit = mime_limit
        self.writer = writer
        # The workspace: where a cell's whole output is kept, whatever a cell chdir'd to.
        self.workspace = os.getcwd()
        self.spills = 0
        self.cells = 0
        self.cell_id = None
        # The cell that ran last: output between cells is tagged with it (ipykernel's parent).
        self.last_cell_id = 0
        self.idle_chars = 0
        # Routing (cell or idle) and the reply's place in the writer's queue, decided together.
        self.lock = threading.RLock()
        self.stdout = Stream(self, "stdout")
        self.stderr = Stream(self, "stderr")
        self.displays = 0
        self.shown_figures = set()
        self.running = False
        module = types.ModuleType("__main__")
        module.__dict__["__builtins__"] = builtins
        module.__dict__["time_remaining"] = time_remaining
        # User code lives in a real __main__, so pickling and multiprocessing find its names.
        sys.modules["__main__"] = module
        self.namespace = module.__dict__
        builtins.display = self.display

    def on_sigint(self, signum, frame):
        if self.running:
            raise KeyboardInterrupt

    def spill_file(self, stream):
        """A file for the running cell's whole `stream` (see HeadTail)."""
        self.spills += 1
        stamp = __import__("time").strftime("%Y%m%d-%H%M%S")
        return open_spill(self.workspace, "%s-%d-%d-%s.txt" % (stamp, os.getpid(), self.spills, stream))

    def begin_cell(self):
        """From here a SIGINT interrupts the cell, and the worker is told so: an interrupt it
        sent before (while this kernel was reading, parsing, compiling) would be ignored, and
        `while True: pass` would run on although the client was answered "interrupted"."""
        self.running = True
        self.writer.put({"id": self.cell_id, "started": True})

    def emit(self, event):
        with self.lock:
            if self.cell_id is not None:
                self.writer.put({"id": self.cell_id, "event": event})
            else:
                self.writer.put({"idle": self.last_cell_id, "event": event})

    def idle_write(self, name, text):
        """Text written while no cell runs: out at once, up to `limit` characters until the
        next cell (a thread printing forever between cells must not flood the channel)."""
        if self.idle_chars > self.limit or not text:
            return  # cut already, and said so
        piece = text[: self.limit - self.idle_chars]
        self.idle_chars += len(piece)
        for i in range(0, len(piece), STREAM_CHUNK_CHARS):
            self.emit({"type": "stream", "name": name, "text": piece[i : i + STREAM_CHUNK_CHARS]})
        if len(piece) < len(text):
            self.idle_chars = self.limit + 1
            self.emit(
                {
                    "type": "stream",
                    "name": "stderr",
                    "text": "\n[... output between cells over %d characters: the rest is left out until the next cell]\n"
                    % self.limit,
                }
            )

    def open_cell(self, cell_id, max_output_chars=None):
        """From here what is written belongs to cell `cell_id` (its caps start afresh, at
        `max_output_chars` when the client asked for less than the kernel's own)."""
        with self.lock:
            self.cell_id = cell_id
            self.cell_limit = self.limit
            if isinstance(max_output_chars, int) and 0 < max_output_chars < self.limit:
                self.cell_limit = max_output_chars
            self.idle_chars = 0
            self.stdout.open_cell()
            self.stderr.open_cell()
        # A cell that replaced sys.stdout (redirect_stdout left open) does not take the
        # kernel's streams from every later cell.
        sys.stdout, sys.stderr = self.stdout, self.stderr

    def end_streams(self):
        """Sends the streams' kept tails now (a cell past the cap): the cell's output is whole
        from here, and close_cell has none left to send."""
        self.stdout.close_cell()
        self.stderr.close_cell()

    def close_cell(self, reply):
        """The streams' kept tails, then the reply; what is written after goes out as idle."""
        self.end_streams()
        with self.lock:
            self.writer.put({"id": self.cell_id, "reply": reply})
            self.last_cell_id = self.cell_id
            self.cell_id = None

    def bundle(self, obj):
        """The MIME bundle of `obj`. A hostile _repr_*_ costs its own entry, never the cell."""
        data = {"text/plain": cap(repr(obj), self.limit)}
        omitted = []

        def add(mime, value):
            if len(value) > self.mime_limit:
                omitted.append("%s of %d characters" % (mime, len(value)))
            else:
                data[mime] = value

        png = figure_png(obj)
        if png is not None:
            self.shown_figures.add(id(obj))
            add("image/png", base64.b64encode(png).decode("ascii"))
        for mime, method in (
            ("text/html", "_repr_html_"),
            ("application/json", "_repr_json_"),
            ("image/png", "_repr_png_"),
        ):
            if mime in data or not hasattr(type(obj), method):
                continue
            try:
                value = getattr(obj, method)()
            except Exception:
                continue
            if value is None:
                continue
            if mime == "image/png":
                # Anything but bytes would reach a client as "base64" that is not.
                if isinstance(value, (bytes, bytearray)):
                    add(mime, base64.b64encode(bytes(value)).decode("ascii"))
            elif mime == "application/json":
                try:
                    add(mime, json.dumps(value))
                except (TypeError, ValueError):
                    continue
            elif isinstance(value, str):
                add(mime, value)
        if omitted:
            data["text/plain"] += "\n[output not shown: %s, over the cap of %d]" % (
                ", ".join(omitted),
                self.mime_limit,
            )
        return data

    def display(self, *objects):
        """Notebook-style display(): each object's MIME bundle, in the order shown."""
        for obj in objects:
            self.display_bundle(None if self.displays >= MAX_DISPLAYS else self.bundle(obj))

    def display_bundle(self, data):
        """One display_data event, or the note that the cell's displays are used up."""
        if self.displays >= MAX_DISPLAYS or data is None:
            if self.displays == MAX_DISPLAYS:
                self.emit(
                    {
                        "type": "display_data",
                        "data": {"text/plain": "[... more displays not shown: %d per cell]" % MAX_DISPLAYS},
                    }
                )
            self.displays += 1
            return
        self.displays += 1
        self.emit({"type": "display_data", "data": data})

    def show_figures(self):
        """Figures left open by the cell are shown and closed, as a notebook's inline backend does."""
        pyplot = sys.modules.get("matplotlib.pyplot")
        if pyplot is None:
            return
        for number in pyplot.get_fignums():
            figure = pyplot.figure(number)
            if id(figure) not in self.shown_figures:
                self.display(figure)
        pyplot.close("all")

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
        return {
            "ename": type(error).__name__,
            "evalue": cap(str(error), self.limit),
            "traceback": cap("".join(traceback.format_exception(type(error), error, tb)), self.limit),
        }

    def run(self, cell_id, code):
        """Runs one native cell; open_cell(cell_id) came first, close_cell follows."""
        self.cells += 1
        self.displays = 0
        self.shown_figures = set()
        filename = "<cell-%d>" % self.cells
        # Registered so tracebacks show the offending source lines.
        linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
        status, result, error = "OK", None, None
        try:
            try:
                tree = ast.parse(code, filename, "exec")
                last = None
                if tree.body and isinstance(tree.body[-1], ast.Expr):
                    last = ast.Expression(tree.body.pop().value)
                body = compile(tree, filename, "exec")
                tail = compile(last, filename, "eval") if last is not None else None
                self.begin_cell()
                exec(body, self.namespace)
                value = eval(tail, self.namespace) if tail is not None else None
                if value is not None:
                    self.namespace["_"] = value
                    result = self.bundle(value)
                self.show_figures()
                self.running = False
            except BaseException as caught:  # the kernel outlives every cell
                self.running = False
                status = "ERROR"
                error = self.format_error(caught, filename)
        finally:
            self.running = False
        return {"status": status, "result": result, "error": error}


def main():
    limit = int(sys.argv[1]) if len(sys.argv) > 1 else 200000
    mime_limit = int(sys.argv[2]) if len(sys.argv) > 2 else 512 * 1024
    requests = os.fdopen(os.dup(0), "rb")
    replies = os.fdopen(os.dup(1), "wb")
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(2, 1)
    # plt.show() under Agg only warns; the figure is shown at the end of the cell anyway.
    warnings.filterwarnings("ignore", message=".*non-interactive.*cannot be shown")
    writer = Writer(replies)
    kernel = Kernel(limit, mime_limit, writer)
    jupyter = None
    if len(sys.argv) > 3 and sys.argv[3]:
        # kernel-jupyter.py, handed over by the worker: Jupyter's messages, IPython if present.
        exec(compile(sys.argv[3], "<openai4s-kernel-jupyter>", "exec"), globals())
        jupyter = globals()["Jupyter"](kernel, requests)
    sys.stdout, sys.stderr = kernel.stdout, kernel.stderr
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
        if "id" not in request:
            continue  # an input_reply that came after its cell ended (interrupted): stale
        kernel.open_cell(request["id"], request.get("max_output_chars"))
        if "jupyter" in request:
            reply = (
                jupyter.handle(request["id"], request["jupyter"])
                if jupyter is not None
                else {"status": "ERROR", "result": None, "error": None}
            )
        else:
            reply = kernel.run(request["id"], request["code"])
        if os.getpid() != pid:
            # The child of a cell's os.fork() came back here: were it to answer, it would
            # reply in the parent's place and then serve every later cell from a copy of the
            # state while the real kernel waits for it. It ends silently, as a forked child
            # of multiprocessing does.
            os._exit(0)
        kernel.close_cell(reply)


main()
