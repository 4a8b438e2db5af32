"""The one process manager of pararl: start child processes, talk to them over
pipes, notice when they die, and always take them down.

Every child runs `_bootstrap`, which makes it ignore SIGINT (the parent owns
shutdown), pins it to one intra-op thread (N processes x N threads would fight for
N cores), and reports any exception that escapes its main function, with the
traceback, as its last message. The parent never blocks without a bound: `ready`
waits on the pipes *and* the process sentinels, so a child that dies (SIGKILL,
segfault) wakes it at once; a child that does not answer in time is stopped with
its Python stack in the error (`timeout_error`), from `faulthandler` on a pipe of its
own, so that a hang says where it hangs.

Replies on a pipe are `(ok, payload)`; a failed reply carries a `RemoteError`.
"""

from __future__ import annotations

import contextlib
import faulthandler
import gc
import math
import multiprocessing as mp
import os
import select
import signal
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Sequence
from multiprocessing.connection import Connection
from multiprocessing.context import BaseContext
from multiprocessing.reduction import ForkingPickler
from typing import Any

from pararl.errors import interrupts_held
from pararl.mp.errors import RemoteError, WorkerError, WorkerTimeoutError, worker_error
from pararl.mp.threads import one_thread

CLOSE_GRACE_S = 2.0  # how long close() lets children exit by themselves
# a message up to this size is written at once (a pipe that is read holds it); a larger
# one by a thread the caller watches, for at most SEND_TIMEOUT_S (`ProcessGroup.send`)
SEND_DIRECT_BYTES = 65_536
SEND_TIMEOUT_S = 300.0


class ParentWatch:
    """Lets a child notice that its parent died (it then gets a new parent pid).

    Works for fork, spawn and forkserver (whose server exits with our parent).
    """

    interval = 1.0

    def __init__(self) -> None:
        self._ppid = os.getppid()

    def orphaned(self) -> bool:
        return os.getppid() != self._ppid


STACK_SIGNAL = signal.SIGUSR1  # asks a child for its Python stack (`timeout_error`)
STACK_WAIT_S = 2.0  # how long the parent waits for that stack to start coming


def _bootstrap(
    conn: Connection,
    stack: Connection,
    target: Callable[..., None],
    args: tuple[Any, ...],
    parents_ends: tuple[int, ...] = (),
) -> None:
    # a forked child holds copies of the parent's ends of its group's pipes, its own
    # included: closed here, so that a parent that dies breaks the pipe and a child
    # blocked writing a reply the pipe cannot hold gets an error instead of waiting
    # for ever (`ParentWatch` is not looked at while a write blocks)
    for fd in parents_ends:
        with contextlib.suppress(OSError):
            os.close(fd)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # a forked child inherits the parent's Python handlers: the run's SIGTERM handler
    # (`errors.sigterm_as_interrupt`) would raise in the child when close() terminates
    # it, and print its traceback; terminated, a child just ends
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    # every thread's Python stack, written by the signal handler itself (no GIL, no
    # Python code), so it comes even from a child stuck in a native call
    faulthandler.register(STACK_SIGNAL, file=stack.fileno(), all_threads=True)
    one_thread()
    try:
        target(conn, *args)
    except BaseException as exc:  # report anything that escapes; the parent decides
        # an env's failure names its env (`vector.transport`'s serial twin sets it)
        report = RemoteError.of(exc, getattr(exc, "env_index", None))
        with contextlib.suppress(OSError, ValueError):
            conn.send((False, report))
    finally:
        conn.close()


@contextlib.contextmanager
def _frozen_for_fork(ctx: BaseContext) -> Iterator[None]:
    """Fork with every object of this process frozen out of the garbage collector
    (`gc.freeze`, CPython's recipe for fork without exec), so that a child never
    collects what it inherited: a finalizer there could wait forever on a lock
    another thread of this process held at the fork. A worker of the test suite
    (threads of its own) hung so, its actor child 'Garbage-collecting' while it built
    its first env. This process collects them again after the fork."""
    if ctx.get_start_method() != "fork":
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def _writable(conn: Connection) -> bool:
    """Whether a short message written to `conn` now goes in without waiting."""
    try:
        poller = select.poll()
        poller.register(conn.fileno(), select.POLLOUT)
        return bool(poller.poll(0))
    except (OSError, ValueError):
        return False


def _reap(processes: Sequence[mp.process.BaseProcess], grace: float) -> None:
    """Join, then terminate, then kill: no child outlives this call."""
    deadline = time.monotonic() + grace
    for proc in processes:
        proc.join(max(0.0, deadline - time.monotonic()))
    for proc in processes:
        if proc.is_alive():
            proc.terminate()
    for proc in processes:
        proc.join(0.5)
        if proc.is_alive():
            proc.kill()
            proc.join(1.0)


class ProcessGroup:
    """N child processes, each running `target(conn, *args[i])`, one pipe each."""

    def __init__(
        self,
        target: Callable[..., None],
        args: Sequence[tuple[Any, ...]],
        ctx: BaseContext,
        name: str = "pararl-worker",
        daemon: bool = True,
    ) -> None:
        self.conns: list[Connection] = []
        self.stacks: list[Connection] = []  # where each child writes its stack, on request
        self.processes: list[mp.process.BaseProcess] = []
        self._target, self._args, self._ctx = target, list(args), ctx
        self._name, self._daemon = name, daemon
        self._closed = False
        self._writing: set[int] = set()  # children with a timed-out write still in their pipe
        self._poller: select.poll | None = None  # built on first use: fds of pipes + sentinels
        self._owner: dict[int, tuple[str, int]] = {}
        # Reaps whatever started, even if a start fails half-way, on close(), on
        # garbage collection and at interpreter exit. It holds the list, not self.
        self._finalizer = weakref.finalize(self, _reap, self.processes, 0.0)
        for index in range(len(self._args)):
            with interrupts_held():  # see `_start`
                conn, stack, proc = self._start(index)
                self.conns.append(conn)
                self.stacks.append(stack)
                self.processes.append(proc)

    def _start(self, index: int) -> tuple[Connection, Connection, mp.process.BaseProcess]:
        """Child `index`, started. Callers hold Ctrl-C and SIGTERM until it is on the
        list that is reaped: one that came during a fork would be raised inside
        CPython's at-fork handlers, which drop it ("Exception ignored in ..."), and the
        run would go on as if no key had been pressed; held, it takes effect after."""
        parent_conn, child_conn = self._ctx.Pipe(duplex=True)
        stack_in, stack_out = self._ctx.Pipe(duplex=False)
        parents_ends: tuple[int, ...] = ()  # a spawned child inherits none of them
        if self._ctx.get_start_method() == "fork":
            ends = (parent_conn, stack_in, *self.conns, *self.stacks)
            parents_ends = tuple(c.fileno() for c in ends if not c.closed)
        proc = self._ctx.Process(  # type: ignore[attr-defined]
            target=_bootstrap,
            args=(child_conn, stack_out, self._target, self._args[index], parents_ends),
            name=f"{self._name}-{index}",
            daemon=self._daemon,
        )
        with _frozen_for_fork(self._ctx):
            proc.start()
        child_conn.close()
        stack_out.close()
        return parent_conn, stack_in, proc

    def restart(self, index: int, args: tuple[Any, ...] | None = None) -> None:
        """Replace child `index` (killed first if still alive) by a fresh one."""
        old = self.processes[index]
        _reap([old], 0.0)
        self.conns[index].close()
        self.stacks[index].close()
        if args is not None:
            self._args[index] = args
        with interrupts_held():  # see `_start`
            self.conns[index], self.stacks[index], self.processes[index] = self._start(index)
        self._poller = None  # its fds changed
        self._owner = {}
        self._writing.discard(index)  # a new pipe

    def __len__(self) -> int:
        return len(self.processes)

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self.processes if p.pid is not None]

    def send(self, index: int, message: Any, timeout: float = SEND_TIMEOUT_S) -> None:
        """`message` to child `index`. One larger than a pipe holds is written by a
        thread while this one watches the clock (`_send_bounded`): a child that stops
        reading is a `WorkerTimeoutError` after `timeout` s, with its stack."""
        payload = ForkingPickler.dumps(message)  # what `Connection.send` writes
        written = True
        try:
            if len(payload) <= SEND_DIRECT_BYTES:
                self.conns[index].send_bytes(payload)
            else:
                written = self._send_bounded(index, payload, timeout)
        except (BrokenPipeError, ConnectionResetError, EOFError, OSError):
            self._raise_last_words(index)
        if not written:  # (a timeout is an OSError: raised out here)
            raise self.timeout_error(
                index, f"did not read a message of {len(payload):,} bytes in {timeout:g} s"
            )

    def _send_bounded(self, index: int, payload: bytes | memoryview, timeout: float) -> bool:
        """Whether `payload` was written within `timeout` s (an error writing it is
        raised); if not, the writer ends when the caller takes the child down."""
        failed: list[BaseException] = []

        def write() -> None:
            try:
                self.conns[index].send_bytes(payload)
            except BaseException as exc:  # raised in the caller's thread, below
                failed.append(exc)

        writer = threading.Thread(target=write, name=f"{self._name}-{index}-send", daemon=True)
        writer.start()
        deadline = time.monotonic() + timeout
        while writer.is_alive():
            writer.join(0.05)
            if writer.is_alive() and time.monotonic() > deadline:
                self._writing.add(index)  # nothing more goes into that pipe
                return False
        if failed:
            raise failed[0]
        return True

    def _raise_last_words(self, index: int) -> None:
        """A child we could not write to is gone: raise the error it reported before
        dying, if any (its unread replies are dropped), else report its death."""
        conn = self.conns[index]
        try:
            while conn.poll(0):
                ok, payload = conn.recv()
                if not ok:
                    raise worker_error(index, payload)
        except (EOFError, OSError):
            pass
        self._raise_dead(index)

    def receive(self, index: int) -> Any:
        """The payload of worker `index`'s next reply; raises `WorkerError` on failure."""
        try:
            ok, payload = self.conns[index].recv()
        except (EOFError, ConnectionResetError, OSError):
            self._raise_dead(index)
        if not ok:
            raise worker_error(index, payload)
        return payload

    def ready(self, indices: Sequence[int], timeout: float | None) -> list[int]:
        """Workers among `indices` with a reply waiting, after at most `timeout` s.

        A worker that died with nothing left to read raises `WorkerError` at once.
        """
        if self._poller is None:
            self._poller = select.poll()
            for i, (conn, proc) in enumerate(zip(self.conns, self.processes, strict=True)):
                self._poller.register(conn.fileno(), select.POLLIN)
                self._poller.register(proc.sentinel, select.POLLIN)
                self._owner[conn.fileno()] = ("conn", i)
                self._owner[proc.sentinel] = ("dead", i)
        ms = None if timeout is None else max(0, math.ceil(timeout * 1000))
        hits = [self._owner[fd] for fd, _ in self._poller.poll(ms)]
        ready = sorted({i for kind, i in hits if kind == "conn"})
        for kind, i in hits:
            if kind == "dead" and i not in ready and not self.conns[i].poll(0):
                self._raise_dead(i)
        wanted = set(indices)
        return [i for i in ready if i in wanted]

    def await_ready(self, timeout: float, indices: Sequence[int] | None = None) -> None:
        """Wait for the first reply (its "ready") of every child, or of those in
        `indices` (a restarted one), at most `timeout` s; if one fails or is late,
        every child is taken down before the error is raised (a group that did not
        start is of no use, and nothing may be left running)."""
        try:
            self.gather(
                range(len(self)) if indices is None else indices,
                timeout,
                "not ready after {timeout} s (building its envs takes too long, or it hangs)",
            )
        except BaseException:
            self.kill()
            raise

    def gather(self, indices: Sequence[int], timeout: float, late: str) -> list[Any]:
        """The next reply of each child in `indices`, in that order, waiting at most
        `timeout` s in all; `late` (formatted with `timeout`) says why one that did not
        answer in time is stuck."""
        deadline = time.monotonic() + timeout
        waiting, replies = list(indices), {}
        while waiting:
            left = deadline - time.monotonic()
            if left <= 0:
                raise self.timeout_error(waiting[0], late.format(timeout=timeout))
            for i in self.ready(waiting, left):
                replies[i] = self.receive(i)
                waiting.remove(i)
        return [replies[i] for i in indices]

    def timeout_error(self, index: int, message: str) -> WorkerTimeoutError:
        """The error for child `index`, which did not answer in time: `message`, and
        the child's Python stack as it is now (every thread's), asked for with
        `STACK_SIGNAL`. The child is of no more use to the caller, who takes it down:
        one still starting, before its handler is set, ends at the signal."""
        stack = self._stack(index)
        return WorkerTimeoutError(
            index,
            message if stack else f"{message}; it gave no Python stack when asked",
            remote_traceback=stack or None,
        )

    def _stack(self, index: int) -> str:
        """What child `index` writes on its stack pipe after `STACK_SIGNAL`: its dump,
        read until the pipe stays quiet for 0.1 s (at most `STACK_WAIT_S` for the
        first bytes, twice that in all); empty if it wrote nothing."""
        proc, pipe = self.processes[index], self.stacks[index]
        if proc.pid is None or not proc.is_alive():
            return ""
        with contextlib.suppress(OSError):
            os.kill(proc.pid, STACK_SIGNAL)
        chunks: list[bytes] = []
        start = time.monotonic()
        while time.monotonic() - start < 2 * STACK_WAIT_S:
            wait = 0.1 if chunks else start + STACK_WAIT_S - time.monotonic()
            if wait <= 0 or not pipe.poll(wait):
                break
            data = os.read(pipe.fileno(), 1 << 16)
            if not data:
                break
            chunks.append(data)
        return b"".join(chunks).decode(errors="replace").rstrip()

    def _raise_dead(self, index: int) -> Any:
        proc = self.processes[index]
        proc.join(0.2)
        code = proc.exitcode
        how = (
            f"killed by signal {signal.Signals(-code).name}"
            if code is not None and code < 0
            else f"exited with code {code}"
        )
        raise WorkerError(
            index, f"worker process died ({how}) without reporting an error", exitcode=code
        )

    def close(self, grace: float = CLOSE_GRACE_S, message: Any = ("close", None)) -> None:
        """Ask every child to exit, wait up to `grace` s, then terminate and kill.

        Idempotent; safe after failures and from any state.
        """
        if self._closed:
            return
        self._closed = True
        for i, proc in enumerate(self.processes):
            # asked only where the message goes in at once: a child that stopped
            # reading (its pipe full, or a timed-out write still in it) is terminated
            if proc.is_alive() and i not in self._writing and _writable(self.conns[i]):
                with contextlib.suppress(OSError, ValueError):
                    self.conns[i].send(message)
        _reap(self.processes, grace)
        for conn in self.conns + self.stacks:
            conn.close()
        self._finalizer.detach()

    def kill(self) -> None:
        """Take every child down now, without asking."""
        self.close(grace=0.0)
