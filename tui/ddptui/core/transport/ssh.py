"""The ssh transport: paramiko, as strict as OpenSSH.

- ~/.ssh/config through paramiko's SSHConfig (HostName, User, Port, IdentityFile, IdentitiesOnly,
  ProxyJump, ConnectTimeout, ServerAliveInterval, UserKnownHostsFile); playbook values win.
- ProxyJump hops are ours: paramiko parses the keyword but never uses it, so each hop is a
  paramiko Transport whose direct-tcpip channel is the next hop's socket.
- Host keys: the user's and the system known_hosts; unknown keys are refused unless accepted
  (the shown fingerprint, or --accept-new-host-keys), then saved; a changed key is always refused.
- One connection per node for the whole run; every command has a timeout; a launch streams its
  output and runs under the guard (see guard.py); the env travels on stdin, never in argv.
"""

from __future__ import annotations

import hashlib
import logging
import os
import select
import shlex
import socket
import threading
import time
from pathlib import Path
from collections.abc import Sequence

import paramiko

from ..errors import NodeError
from ..playbook.model import NodeSpec, SSHOptions
from .base import (
    ENV_PRELUDE, GUARD_SOURCE, CommandResult, LaunchSpec, OnLines, RemoteProcess, Transport, env_stdin,
)
from .known_hosts import KnownHosts, lookup_name
from .ssh_auth import authenticate, check_host_key
from .ssh_config import Target, _load_config, _parse_hop, resolve
from .ssh_pipe import PiecesPipe

# paramiko logs handshake failures with tracebacks; we turn them into words ourselves.
logging.getLogger("paramiko").addHandler(logging.NullHandler())

# Still offered by paramiko 5 and worth refusing, as current OpenSSH does by default.
DISABLED_ALGORITHMS = {
    "ciphers": ["3des-cbc", "aes128-cbc", "aes192-cbc", "aes256-cbc"],
    "macs": ["hmac-sha1", "hmac-md5", "hmac-sha1-96", "hmac-md5-96"],
}
READ_ALL = 1 << 23  # bytes: more than paramiko's channel window (2 MiB by default)
MAX_SESSIONS = 8  # sshd allows 10 per connection by default; leave room for the launch
EOF_GRACE = 2.0  # seconds a command's output may stay open after its exit status came (see _collect)


class SSHProcess(RemoteProcess):
    def __init__(self, node: str, chan: paramiko.Channel, on_lines: OnLines, transport: paramiko.Transport) -> None:
        super().__init__(node)
        self._chan = chan
        self._t = transport
        self._start_readers(on_lines)

    def _read_stdout(self) -> bytes:
        try:
            # all that is there, up to more than the channel's window: one read takes what the
            # packets brought since the last (ssh_pipe.PiecesPipe joins them, or hands the one)
            return self._chan.recv(READ_ALL)
        except (OSError, EOFError, paramiko.SSHException):
            return b""

    def _read_stderr(self) -> bytes:
        try:
            return self._chan.recv_stderr(65536)
        except (OSError, EOFError, paramiko.SSHException):
            return b""

    def _exit_status(self) -> tuple[int | None, bool]:
        if self._chan.exit_status_ready():
            rc = self._chan.recv_exit_status()
            if rc >= 0:
                return rc, False
        return None, True  # no word from the guard and no exit status: the connection is gone

    def _send(self, data: bytes) -> None:
        try:
            self._chan.sendall(data)
        except (OSError, EOFError, paramiko.SSHException):
            pass


class SSHTransport(Transport):
    kind = "ssh"

    def __init__(self, spec: NodeSpec, opts: SSHOptions, settings) -> None:
        super().__init__(spec.name)
        self.spec = spec
        self.opts = opts
        self.settings = settings
        self._cfg = _load_config(settings.ssh_config)
        self.target = resolve(spec.name, self._cfg, opts, host=spec.host, user=spec.user, port=spec.port)
        self._hops: list[paramiko.Transport] = []
        self._t: paramiko.Transport | None = None
        self._sessions = threading.BoundedSemaphore(MAX_SESSIONS)
        self._home: str | None = None
        self._lock = threading.Lock()
        self.notes: list[str] = []  # what the user may want to know (skipped known_hosts lines...)
        self.tried_keys: list[str] = []
        self._peer: str | None = None

    @property
    def address(self) -> str | None:
        return self._peer

    # ---- connecting ---------------------------------------------------------------------------
    def connect(self) -> None:
        chain = [resolve(h_alias, self._cfg, self.opts, user=u, port=p)
                 for u, h_alias, p in (_parse_hop(h) for h in self.target.proxy_jump)]
        sock = None
        for hop, nxt in zip(chain, chain[1:] + [self.target]):
            try:
                t = self._open(hop, sock)
            except NodeError as e:
                self.close()
                raise NodeError(self.node, f"jump host {hop.alias} failed: {e.reason}", "jump") from None
            self._hops.append(t)
            try:
                sock = t.open_channel("direct-tcpip", (nxt.hostname, nxt.port), ("127.0.0.1", 0),
                                      timeout=self.target.connect_timeout)
            except (paramiko.ChannelException, paramiko.SSHException, OSError) as e:
                self.close()
                raise NodeError(self.node, f"jump host {hop.alias} could not reach {nxt.hostname}:{nxt.port}: "
                                           f"{_words(e)}", "jump") from None
        self._t = self._open(self.target, sock)
        if sock is None:
            self._peer = self._t.getpeername()[0]
        else:
            try:
                self._peer = socket.gethostbyname(self.target.hostname)
            except OSError:
                self._peer = self.target.hostname

    def _open(self, target: Target, sock) -> paramiko.Transport:
        where = f"{target.hostname}:{target.port}"
        if sock is None:
            try:
                infos = socket.getaddrinfo(target.hostname, target.port, type=socket.SOCK_STREAM)
            except socket.gaierror:
                raise NodeError(self.node, f"cannot resolve host name {target.hostname!r} "
                                           "(check HostName in ~/.ssh/config or `host:` in the playbook)", "dns") from None
            family, _, _, _, addr = infos[0]
            s = socket.socket(family, socket.SOCK_STREAM)
            s.settimeout(target.connect_timeout)
            try:
                s.connect(addr)
            except TimeoutError:
                s.close()
                raise NodeError(self.node, f"timed out after {target.connect_timeout:g} s connecting to {where} "
                                           "(ConnectTimeout): the node is down, or a firewall drops the packets", "timeout") from None
            except ConnectionRefusedError:
                s.close()
                raise NodeError(self.node, f"connection refused by {where}: is sshd running there, on that port?",
                                "refused") from None
            except OSError as e:
                s.close()
                raise NodeError(self.node, f"cannot connect to {where}: {_words(e)}", "unreachable") from None
            s.settimeout(None)
            sock = s
        t = paramiko.Transport(sock, disabled_algorithms=DISABLED_ALGORITHMS)
        opts = t.get_security_options()
        usable = [c for c in target.ciphers if c in opts.ciphers]
        if not usable:
            t.close()
            raise NodeError(self.node, f"no cipher to offer {where}: ssh_config's Ciphers for {target.alias} leaves "
                                       f"none that ddptui can use ({', '.join(opts.ciphers)})", "config")
        opts.ciphers = usable
        t.banner_timeout = target.connect_timeout
        t.handshake_timeout = target.connect_timeout
        t.auth_timeout = target.connect_timeout
        kh = KnownHosts.load(target.known_hosts_files)
        self.notes.extend(kh.skipped)
        name = lookup_name(target.host_key_alias or target.hostname, target.port)
        known = kh.known_keys(name)
        if known:  # prefer the key type we know, as OpenSSH and paramiko's SSHClient do
            types = [k.get_name() for k in known]
            opts.key_types = types + [k for k in opts.key_types if k not in types]
        try:
            t.start_client(timeout=target.connect_timeout)
        except (paramiko.SSHException, EOFError, OSError) as e:
            t.close()
            raise NodeError(self.node, f"no SSH handshake with {where} within {target.connect_timeout:g} s: {_words(e)}",
                            "handshake") from None
        key = t.get_remote_server_key()
        self._check_host_key(target, kh, name, key, t)
        self._auth(target, t)
        t.set_keepalive(target.keepalive)
        return t

    def _check_host_key(self, target: Target, kh: KnownHosts, name: str, key: paramiko.PKey,
                        t: paramiko.Transport) -> None:
        note = check_host_key(self.node, self.settings, target, kh, name, key, t)
        if note:
            self.notes.append(note)

    def _auth(self, target: Target, t: paramiko.Transport) -> None:
        self.tried_keys = authenticate(self.node, self.settings, target, t)

    def alive(self, timeout: float) -> bool:
        """Does the node still answer? A keepalive request with a reply (any reply will do)."""
        t = self._t
        if t is None or not t.is_active():
            return False
        answered = threading.Event()

        def ask() -> None:
            try:
                t.global_request("keepalive@openssh.com", wait=True)
            except Exception:
                pass
            answered.set()

        threading.Thread(target=ask, daemon=True).start()
        return answered.wait(timeout) and t.is_active()

    # ---- commands -------------------------------------------------------------------------------
    def _session(self) -> paramiko.Channel:
        if self._t is None or not self._t.is_active():
            raise NodeError(self.node, "the connection to the node was lost", "lost")
        for wait in (0.05, 0.2, 0.5, 1.0, None):
            try:
                return self._t.open_session(timeout=self.target.connect_timeout)
            except paramiko.ChannelException as e:
                # sshd refuses a session while it is still tearing down ones we already closed
                # (its MaxSessions counts them a moment longer): wait a little, as OpenSSH's mux would
                if e.code != paramiko.common.OPEN_FAILED_CONNECT_FAILED or wait is None:
                    raise
                time.sleep(wait)
        raise AssertionError("unreachable")

    def run(self, argv: Sequence[str], *, timeout: float, env: dict[str, str] | None = None,
            stdin: bytes | None = None, shell: str | None = None) -> CommandResult:
        if shell is not None:
            script = ENV_PRELUDE + shell
            command = shlex.join(["sh", "-c", script])
            shown = ("sh", "-c", shell)
        else:
            command = shlex.join(["sh", "-c", ENV_PRELUDE + 'exec "$@"', "sh", *argv])
            shown = tuple(argv)
        t0 = time.monotonic()
        with self._sessions:
            chan = self._session()
            try:
                chan.exec_command(command)
                chan.sendall(env_stdin(env) + (stdin or b""))
                chan.shutdown_write()
                out, err, rc = self._collect(chan, timeout)
            finally:
                chan.close()
        return CommandResult(shown, rc, out.decode("utf-8", "replace"), err.decode("utf-8", "replace"),
                             time.monotonic() - t0)

    @staticmethod
    def _collect(chan: paramiko.Channel, timeout: float) -> tuple[bytes, bytes, int | None]:
        """The command's stdout and stderr up to the channel's EOF, and its exit status. sshd may
        send the exit status before the last of the output (it reaps the command while the pipe
        still holds what it wrote): stopping at the status lost a node probe's last sections (CI,
        2026-12-02). A command that exits while something it started keeps the output open gets
        EOF_GRACE seconds more (OpenSSH's client would wait for it), then what came is the answer."""
        out, err = bytearray(), bytearray()
        deadline = time.monotonic() + timeout
        exited_at: float | None = None
        chan.setblocking(False)
        while True:
            now = time.monotonic()
            left = deadline - now
            if left <= 0:
                return bytes(out), bytes(err), None
            select.select([chan], [], [], min(left, 0.5 if exited_at is None else 0.05))
            progressed = False
            while chan.recv_ready():
                out += chan.recv(65536)
                progressed = True
            while chan.recv_stderr_ready():
                err += chan.recv_stderr(65536)
                progressed = True
            if chan.exit_status_ready() and not chan.recv_ready() and not chan.recv_stderr_ready():
                if exited_at is None:
                    exited_at = now
                if chan.eof_received or chan.closed or now - exited_at >= EOF_GRACE:
                    return bytes(out), bytes(err), chan.recv_exit_status()
            elif chan.closed and not progressed:
                return bytes(out), bytes(err), None

    def start(self, spec: LaunchSpec, on_lines: OnLines, python: str) -> SSHProcess:
        chan = self._session()
        chan.in_buffer = PiecesPipe()  # before any data: the job's output, kept as its packets came
        chan.exec_command(shlex.join([python, "-c", GUARD_SOURCE]))
        chan.sendall(spec.to_stdin())
        return SSHProcess(self.node, chan, on_lines, self._t)

    def put_file(self, local: Path, remote_name: str) -> str:
        data = Path(local).read_bytes()
        digest = hashlib.sha256(data).hexdigest()[:12]
        stem, dot, ext = remote_name.rpartition(".")
        name = f"{stem}-{digest}.{ext}" if dot else f"{remote_name}-{digest}"
        with self._lock, self._sessions:
            sftp = paramiko.SFTPClient.from_transport(self._t)
            try:
                home = sftp.normalize(".")
                path = f"{home.rstrip('/')}/.cache/ddptui/{name}"
                try:
                    if sftp.stat(path).st_size == len(data):
                        return path
                except OSError:
                    pass
                for d in (f"{home.rstrip('/')}/.cache", f"{home.rstrip('/')}/.cache/ddptui"):
                    try:
                        sftp.mkdir(d)
                    except OSError:
                        pass
                tmp = f"{path}.{os.getpid()}.tmp"
                with sftp.open(tmp, "wb") as f:
                    f.write(data)
                sftp.posix_rename(tmp, path)
                return path
            finally:
                sftp.close()

    def close(self) -> None:
        for t in ([self._t] if self._t else []) + list(reversed(self._hops)):
            try:
                t.close()
            except Exception:
                pass
        self._t = None
        self._hops = []


def _words(e: BaseException) -> str:
    if isinstance(e, socket.timeout):
        return "timed out"
    if isinstance(e, OSError) and e.strerror:
        return e.strerror
    return str(e) or type(e).__name__
