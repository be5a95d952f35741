"""Jupyter messages in the openai4s kernel: run by kernel.py (exec'd into its globals), never
on its own.

A request line {"id": N, "jupyter": {"msg_type": ..., "content": {...}}} is answered by
`Jupyter.handle`: while it runs, Jupyter's iopub and stdin messages go out as events
    {"id": N, "event": {"type": "jupyter", "channel": "iopub"|"stdin",
                        "msg_type": ..., "content": {...}, "metadata": {...}}}
(streams stay the kernel's own {"type": "stream"} events, capped and merged as for every
cell), and the reply is the usual reply line with one more field,
    "jupyter": {"msg_type": "<x>_reply", "content": {...}}.
Headers, parent headers and signatures are the daemon's: the kernel only says what happened.

Where IPython imports (Debian's python3-ipykernel, or the user's environment), cells run
through IPython's InteractiveShell: magics, `!cmd`, top-level await, In/Out, `;`, display ids,
clear_output, any MIME bundle, IPython's completer and inspector. Elsewhere the plain kernel
runs them and completion is rlcompleter's. kernel_info says which (`implementation`).

Comms (ipywidgets, and any comm target a library registers): ipykernel's Comm and
CommManager (6.x) publish through `Kernel.instance().session.send` and find targets in its
`comm_manager`. A stand-in kernel (CommKernel below) is registered as that singleton, made the
first time something asks for it (`get_ipython().kernel`, a comm message from the client):
what it publishes goes out as iopub messages, in a cell or between cells alike. The `comm`
package's create_comm and get_comm_manager (ipywidgets 8) are pointed at the same, as
ipykernel does. Without
IPython a client's comm_open is answered with its comm_close (no target can exist), and
comm_info lists nothing. Binary buffers travel base64 both ways.

`input()` asks the client (an input_request on stdin) and blocks reading the next line of the
private request channel, which the worker fills with {"input_reply": "..."} only while a cell
waits for it: cells run one at a time, so nothing else can arrive meanwhile.
"""

import codeop
import platform
import pydoc
import re

PROTOCOL_VERSION = "5.3"


class StdinNotAllowed(RuntimeError):
    pass


def json_bundle(data):
    """A native bundle (JSON as text) as Jupyter wants it (JSON as JSON)."""
    out = {}
    for mime, value in data.items():
        if (mime == "application/json" or mime.endswith("+json")) and isinstance(value, str):
            try:
                value = json.loads(value)
            except ValueError:
                pass
        out[mime] = value
    return out


def capped_bundle(data, limit):
    """Values over the kernel's MIME cap are left out, and text/plain says so."""
    kept, omitted = {}, []
    for mime, value in data.items():
        size = len(value) if isinstance(value, str) else len(json.dumps(value, default=str))
        if size > limit:
            omitted.append("%s of %d characters" % (mime, size))
        else:
            kept[mime] = value
    if omitted:
        kept["text/plain"] = "%s\n[output not shown: %s, over the cap of %d]" % (
            kept.get("text/plain", ""),
            ", ".join(omitted),
            limit,
        )
    return kept


class Jupyter:
    def __init__(self, kernel, requests):
        self.kernel = kernel
        self.requests = requests
        self.count = 1  # the plain kernel's execution count; IPython keeps its own
        self.allow_stdin = False
        self.last_error = None
        self.active = False  # a Jupyter request is running (not a native exec)
        self.shell = None
        self.ipython_version = None
        self.ipython_display = None
        self.comm_kernel = None  # made on first use (make_comm_kernel)
        self.no_comms = False  # ipykernel would not import: not tried again
        try:
            self.shell = make_shell(self)
        except Exception as error:  # IPython missing or broken: the plain kernel serves
            sys.__stderr__.write("openai4s kernel: no IPython layer (%s)\n" % error)

    # -- out ---------------------------------------------------------------------------

    def emit(self, channel, msg_type, content, metadata=None, buffers=None):
        event = {"type": "jupyter", "channel": channel, "msgType": msg_type, "content": content, "metadata": metadata or {}}
        if buffers:
            event["buffers"] = [base64.b64encode(bytes(b)).decode("ascii") for b in buffers]
        self.kernel.emit(event)

    def publish(self, data, metadata, transient, update):
        limit = self.kernel.mime_limit
        if not self.active:
            # A native exec calling IPython's display(): the native event, values as text.
            text = {k: v if isinstance(v, str) else json.dumps(v, default=str) for k, v in data.items()}
            self.kernel.display_bundle(capped_bundle(text, limit))
            return
        content = {"data": capped_bundle(data, limit), "metadata": metadata, "transient": transient}
        if self.kernel.displays >= MAX_DISPLAYS and not update:
            return
        self.kernel.displays += 1
        self.emit("iopub", "update_display_data" if update else "display_data", content)

    # -- in ----------------------------------------------------------------------------

    def read_input(self, prompt="", password=False):
        if not self.allow_stdin:
            raise StdinNotAllowed("input() was called, but this client does not answer input requests")
        sys.stdout.flush()
        sys.stderr.flush()
        self.emit("stdin", "input_request", {"prompt": str(prompt), "password": password})
        while True:
            line = self.requests.readline()
            if not line:
                raise EOFError("the worker is gone")
            message = json.loads(line)
            if "input_reply" in message:
                return str(message["input_reply"])

    # -- requests ----------------------------------------------------------------------

    def handle(self, cell_id, message):
        msg_type = message.get("msg_type", "")
        content = message.get("content") or {}
        handler = {
            "execute_request": self.execute,
            "kernel_info_request": lambda c: self.kernel_info(),
            "complete_request": self.complete,
            "inspect_request": self.inspect,
            "is_complete_request": self.is_complete,
            "history_request": lambda c: {"status": "ok", "history": []},
            "comm_info_request": self.comm_info,
            "comm_open": lambda c: self.comm(msg_type, c, message.get("buffers")),
            "comm_msg": lambda c: self.comm(msg_type, c, message.get("buffers")),
            "comm_close": lambda c: self.comm(msg_type, c, message.get("buffers")),
        }.get(msg_type)
        reply_type = msg_type[: -len("_request")] + "_reply" if msg_type.endswith("_request") else "error_reply"
        if msg_type.startswith("comm_") and not msg_type.endswith("_request"):
            reply_type = ""  # the protocol has no reply to a comm message: the daemon sends none
        self.emit("iopub", "status", {"execution_state": "busy"})
        self.active = True
        native_display = builtins.display
        if self.shell is not None:
            builtins.display = self.ipython_display
        try:
            if handler is None:
                reply = {
                    "status": "error",
                    "ename": "UnknownMessageType",
                    "evalue": "this kernel does not answer %r" % msg_type[:100],
                    "traceback": [],
                }
            else:
                reply = handler(content)
        except BaseException as caught:  # the kernel outlives every request
            reply = {"status": "error", "ename": type(caught).__name__, "evalue": str(caught), "traceback": []}
        finally:
            self.active = False
            builtins.display = native_display
        # The kept tails of an output past the cap go out before idle: a Jupyter client
        # (nbclient, JupyterLab) takes idle as the end of the cell's output, and nbclient
        # dropped the tail that came after it (the final loss, the summary) from the notebook.
        self.kernel.end_streams()
        # Idle goes out before the reply line: the daemon relays both in this order.
        self.emit("iopub", "status", {"execution_state": "idle"})
        return {"status": "OK", "result": None, "error": None, "jupyter": {"msgType": reply_type, "content": reply}}

    def comm_manager(self):
        """ipykernel's CommManager, made on first use; None without IPython or ipykernel
        (then a client's comm_open is closed again, as in the plain kernel)."""
        if self.comm_kernel is None and self.shell is not None and not self.no_comms:
            try:
                self.comm_kernel = make_comm_kernel(self, self.shell)
            except Exception as error:
                self.no_comms = True
                sys.__stderr__.write("openai4s kernel: no comms (%s)\n" % error)
        return None if self.comm_kernel is None else self.comm_kernel.comm_manager

    def comm(self, msg_type, content, buffers=None):
        """A comm message from the client, dispatched as ipykernel does (a target's callback,
        a comm's on_msg). A comm_open nobody can take is closed again, never left hanging."""
        manager = self.comm_manager()
        if manager is None:
            if msg_type == "comm_open":
                self.emit("iopub", "comm_close", {"comm_id": str(content.get("comm_id", "")), "data": {}})
            return {}
        message = {
            "header": {"msg_type": msg_type},
            "parent_header": {},
            "metadata": {},
            "content": dict(content),
            "buffers": [base64.b64decode(b) for b in buffers or []],
        }
        getattr(manager, msg_type)(None, None, message)
        return {}

    def comm_info(self, content):
        target = content.get("target_name")
        manager = self.comm_manager() if self.comm_kernel is not None else None
        comms = {}
        if manager is not None:
            for comm_id, comm in list(manager.comms.items()):
                if target is None or comm.target_name == target:
                    comms[comm_id] = {"target_name": comm.target_name}
        return {"status": "ok", "comms": comms}

    def kernel_info(self):
        ipython = self.shell is not None
        return {
            "status": "ok",
            "protocol_version": PROTOCOL_VERSION,
            "implementation": "openai4s-ipython" if ipython else "openai4s-plain",
            "implementation_version": self.ipython_version or "1",
            "language_info": {
                "name": "python",
                "version": platform.python_version(),
                "mimetype": "text/x-python",
                "file_extension": ".py",
                "pygments_lexer": "ipython3" if ipython else "python3",
                "codemirror_mode": {"name": "ipython" if ipython else "python", "version": 3},
                "nbconvert_exporter": "python",
            },
            "banner": "Python %s on openai4s (%s)"
            % (platform.python_version(), "IPython %s" % self.ipython_version if ipython else "plain kernel, no IPython"),
            "help_links": [],
        }

    def execute(self, content):
        code = str(content.get("code", ""))
        silent = bool(content.get("silent", False))
        store_history = bool(content.get("store_history", not silent))
        self.allow_stdin = bool(content.get("allow_stdin", False))
        saved_input = builtins.input
        builtins.input = lambda prompt="": self.read_input(prompt)
        getpass_module = sys.modules.get("getpass")
        saved_getpass = getattr(getpass_module, "getpass", None)
        if getpass_module is not None:
            getpass_module.getpass = lambda prompt="Password: ", stream=None: self.read_input(prompt, True)
        try:
            if self.shell is not None:
                return self.execute_ipython(code, silent, store_history, content)
            return self.execute_plain(code, silent)
        finally:
            builtins.input = saved_input
            if getpass_module is not None and saved_getpass is not None:
                getpass_module.getpass = saved_getpass
            self.allow_stdin = False

    def execute_ipython(self, code, silent, store_history, content):
        shell = self.shell
        kernel = self.kernel
        if not silent:
            self.emit("iopub", "execute_input", {"code": code, "execution_count": shell.execution_count})
        self.last_error = None
        kernel.displays = 0
        kernel.shown_figures = set()
        captures = [FdCapture(1, kernel.stdout), FdCapture(2, kernel.stderr)]
        try:
            # From here a SIGINT interrupts the cell, and the worker is told so (it holds an
            # interrupt that arrives before this line: sent earlier, it would be ignored).
            kernel.begin_cell()
            try:
                result = shell.run_cell(code, store_history=store_history, silent=silent)
                if not silent:
                    self.show_figures()
            finally:
                kernel.running = False
            expressions = {}
            if result.success:
                expressions = shell.user_expressions(content.get("user_expressions") or {})
        except KeyboardInterrupt as caught:  # landed outside the user's code, in IPython's
            result = None
            self.last_error = {"ename": "KeyboardInterrupt", "evalue": str(caught), "traceback": []}
            self.emit("iopub", "error", self.last_error)
        finally:
            for capture in captures:
                capture.stop()
        count = shell.execution_count - 1 if store_history else shell.execution_count
        if result is not None and result.success:
            return {"status": "ok", "execution_count": count, "user_expressions": expressions, "payload": []}
        error = self.last_error or {"ename": "Error", "evalue": "", "traceback": []}
        return dict(error, status="error", execution_count=count, user_expressions={}, payload=[])

    def show_figures(self):
        """Figures left open by the cell are shown and closed, as IPython's inline backend does."""
        pyplot = sys.modules.get("matplotlib.pyplot")
        if pyplot is None:
            return
        from IPython.display import display as ipython_display

        for number in pyplot.get_fignums():
            figure = pyplot.figure(number)
            if id(figure) not in self.kernel.shown_figures:
                ipython_display(figure)
        pyplot.close("all")

    def execute_plain(self, code, silent):
        count = self.count
        if not silent:
            self.emit("iopub", "execute_input", {"code": code, "execution_count": count})
            self.count += 1
        reply = self.kernel.run(self.kernel.cell_id, code)
        if reply["result"] is not None and not silent:
            self.emit(
                "iopub",
                "execute_result",
                {"execution_count": count, "data": json_bundle(reply["result"]), "metadata": {}},
            )
        if reply["status"] == "OK":
            return {"status": "ok", "execution_count": count, "user_expressions": {}, "payload": []}
        error = reply["error"]
        error = {"ename": error["ename"], "evalue": error["evalue"], "traceback": error["traceback"].splitlines()}
        self.emit("iopub", "error", error)
        return dict(error, status="error", execution_count=count, user_expressions={}, payload=[])

    def complete(self, content):
        code = str(content.get("code", ""))
        cursor = int(content.get("cursor_pos", len(code)))
        if self.shell is not None:
            # IPython's completer over the whole cell (jedi's inference when jedi imports).
            from IPython.core.completer import provisionalcompleter, rectify_completions

            with provisionalcompleter():
                found = list(rectify_completions(code, self.shell.Completer.completions(code, cursor)))
            start, end = (found[0].start, found[0].end) if found else (cursor, cursor)
            matches = [c.text for c in found]
        else:
            text = re.search(r"[\w.]*$", code[:cursor]).group(0)
            start, end, matches = cursor - len(text), cursor, plain_matches(text, self.kernel.namespace)
        return {"status": "ok", "matches": matches, "cursor_start": start, "cursor_end": end, "metadata": {}}

    def inspect(self, content):
        code = str(content.get("code", ""))
        cursor = int(content.get("cursor_pos", len(code)))
        detail = int(content.get("detail_level", 0))
        if self.shell is not None:
            from IPython.utils.tokenutil import token_at_cursor

            name = token_at_cursor(code, cursor)
            try:
                data = self.shell.object_inspect_mime(name, detail_level=detail)
                return {"status": "ok", "found": True, "data": data, "metadata": {}}
            except KeyError:
                return {"status": "ok", "found": False, "data": {}, "metadata": {}}
        name = re.search(r"[\w.]*$", code[:cursor]).group(0) or re.match(r"[\w.]*", code[cursor:]).group(0)
        try:
            obj = eval(name, self.kernel.namespace) if name else None
        except Exception:
            obj = None
        if obj is None:
            return {"status": "ok", "found": False, "data": {}, "metadata": {}}
        text = pydoc.render_doc(obj, renderer=pydoc.plaintext)
        return {"status": "ok", "found": True, "data": {"text/plain": text}, "metadata": {}}

    def is_complete(self, content):
        code = str(content.get("code", ""))
        if self.shell is not None:
            status, indent = self.shell.input_transformer_manager.check_complete(code)
            reply = {"status": status}
            if status == "incomplete":
                reply["indent"] = " " * (indent or 0)
            return reply
        try:
            compiled = codeop.compile_command(code, "<cell>", "exec")
        except (SyntaxError, ValueError, OverflowError):
            return {"status": "invalid"}
        return {"status": "complete"} if compiled is not None else {"status": "incomplete", "indent": ""}


class FdCapture:
    """What subprocesses and C code write to fd 1 or 2 during a cell, into the cell's stream.

    The fd is pointed at a pipe for the cell (the kernel's own protocol channel is a private
    duplicate, untouched); a thread forwards what arrives. At the end C's stdio buffers are
    flushed, the fd restored, and the thread drains what is left. A background process that
    outlives the cell keeps the pipe: the thread is not waited for beyond a moment, and what
    it forwards later lands in the cell running then, or goes out as output between cells.
    """

    def __init__(self, fd, stream):
        self.fd = fd
        self.saved = None
        self.thread = None
        try:
            read_end, write_end = os.pipe()
            self.saved = os.dup(fd)
            os.dup2(write_end, fd)
            os.close(write_end)
        except OSError:
            self.saved = None
            return
        decoder = __import__("codecs").getincrementaldecoder("utf-8")("replace")

        def forward():
            with os.fdopen(read_end, "rb", buffering=0) as pipe:
                while True:
                    chunk = pipe.read(65536)
                    if not chunk:
                        break
                    stream.write(decoder.decode(chunk))

        self.thread = threading.Thread(target=forward, name="openai4s-fd%d" % fd, daemon=True)
        self.thread.start()

    def stop(self):
        if self.saved is None:
            return
        try:
            __import__("ctypes").CDLL(None).fflush(None)
        except Exception:
            pass
        os.dup2(self.saved, self.fd)
        os.close(self.saved)
        self.saved = None
        self.thread.join(0.2)


def plain_matches(text, namespace):
    import rlcompleter

    completer = rlcompleter.Completer(namespace)
    matches = []
    for state in range(1000):
        match = completer.complete(text, state)
        if match is None:
            break
        matches.append(match)
    return matches


def make_comm_kernel(layer, shell):
    """The singleton ipykernel's Comm and CommManager talk to (see the top): its session.send
    is our iopub, its comm_manager the one registry of targets and open comms."""
    from ipykernel.comm import CommManager
    from ipykernel.kernelbase import Kernel
    from traitlets import Any

    class Session:
        def send(self, stream, msg_type, content=None, parent=None, ident=None, buffers=None, metadata=None, **kwargs):
            # Serialised now, as ipykernel's session does: the writer thread dumps it later,
            # and a widget's state dict may change meanwhile.
            content = json.loads(json.dumps(content or {}, default=str))
            metadata = json.loads(json.dumps(metadata or {}, default=str))
            layer.emit("iopub", msg_type, content, metadata, buffers)

    class CommKernel(Kernel):
        session = Any()
        shell = Any()

    # What ipykernel logs (a comm target that raised, an unknown comm) goes to the job log,
    # as ipykernel's goes to its terminal, not into the user's cell.
    log = __import__("logging").getLogger("openai4s.kernel.comm")
    log.addHandler(__import__("logging").StreamHandler(sys.__stderr__))
    log.propagate = False
    kernel = CommKernel.instance(session=Session(), shell=shell, log=log)
    kernel.comm_manager = CommManager(parent=kernel, kernel=kernel, log=log)
    return kernel


def make_shell(layer):
    """An InteractiveShell over the kernel's __main__, whose output goes out as Jupyter's."""
    import IPython
    from IPython.core.displayhook import DisplayHook
    from IPython.core.displaypub import DisplayPublisher
    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.config import Config

    layer.ipython_version = IPython.__version__

    class Publisher(DisplayPublisher):
        def publish(self, data, metadata=None, source=None, *, transient=None, update=False, **kwargs):
            sys.stdout.flush()
            layer.publish(data, metadata or {}, transient or {}, update)

        def clear_output(self, wait=False):
            sys.stdout.flush()
            layer.emit("iopub", "clear_output", {"wait": bool(wait)})

    class Hook(DisplayHook):
        def start_displayhook(self):
            self.pending = None

        def write_output_prompt(self):
            pass

        def write_format_data(self, format_dict, md_dict=None):
            self.pending = (format_dict, md_dict or {})

        def finish_displayhook(self):
            sys.stdout.flush()
            if self.pending is not None:
                data, metadata = self.pending
                layer.emit(
                    "iopub",
                    "execute_result",
                    {
                        "execution_count": self.prompt_count,
                        "data": capped_bundle(data, layer.kernel.mime_limit),
                        "metadata": metadata,
                    },
                )
            self.pending = None

    class Shell(InteractiveShell):
        @property
        def kernel(self):
            """ipywidgets and other comm users look for `get_ipython().kernel.comm_manager`;
            without ipykernel there is none (hasattr says so)."""
            if layer.comm_manager() is None:
                raise AttributeError("kernel")
            return layer.comm_kernel

        def _showtraceback(self, etype, evalue, stb):
            sys.stdout.flush()
            sys.stderr.flush()
            error = {
                "ename": getattr(etype, "__name__", str(etype)),
                "evalue": str(evalue),
                "traceback": list(stb),
            }
            layer.last_error = error
            layer.emit("iopub", "error", error)

    config = Config()
    # The sandbox's home may be read-only or shared by nodes: history stays in memory.
    config.HistoryManager.hist_file = ":memory:"
    # The singleton: IPython.display.display() finds the shell through instance().
    shell = Shell.instance(
        config=config,
        user_module=sys.modules["__main__"],
        display_pub_class=Publisher,
        displayhook_class=Hook,
    )
    # IPython put its display() into builtins; native cells keep the kernel's own (its bundles
    # and caps), Jupyter cells get IPython's for the duration of each request.
    from IPython.core.display_functions import display as ipython_display

    layer.ipython_display = ipython_display
    builtins.display = layer.kernel.display
    png = shell.display_formatter.formatters["image/png"]

    def figure_png_base64(figure):
        layer.kernel.shown_figures.add(id(figure))
        return base64.b64encode(figure_png(figure)).decode("ascii")

    png.for_type_by_name("matplotlib.figure", "Figure", figure_png_base64)
    hook_comm_package(layer)
    return shell


def hook_comm_package(layer):
    """Libraries written for the `comm` package (ipywidgets 8) call comm.create_comm and
    comm.get_comm_manager, which ipykernel replaces when it starts; without that they get a
    comm that sends nothing. Replaced here the same way, onto the stand-in kernel (made on
    first use). Absent package: nothing to hook."""
    try:
        import comm
    except ImportError:
        return

    def create_comm(*args, **kwargs):
        layer.comm_manager()
        from ipykernel.comm import Comm

        return Comm(*args, **kwargs)

    comm.create_comm = create_comm
    comm.get_comm_manager = layer.comm_manager
