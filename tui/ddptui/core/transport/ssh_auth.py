"""Host keys and authentication, as strict as OpenSSH: known_hosts honoured, an unknown key refused
unless the user accepts its whole fingerprint, a changed key always refused; agent keys, then the
identity files, with a passphrase asked for where one is needed."""

from __future__ import annotations

import os

import paramiko

from ..errors import ChangedHostKey, NodeError, UnknownHostKey
from .known_hosts import KnownHosts
from .ssh_config import DEFAULT_IDENTITIES, Target


def check_host_key(node: str, settings, target: Target, kh: KnownHosts, name: str, key: paramiko.PKey,
                   t: paramiko.Transport) -> str | None:
    """Refuse a revoked or changed key always, an unknown one unless accepted (never for a host that
    known_hosts says proves itself with a certificate); the note to show when one was saved."""
    revoked = kh.revoked(name, key)
    if revoked is not None:
        t.close()
        raise NodeError(
            node,
            "@@@ WARNING: REVOKED HOST KEY DETECTED! @@@ "
            f"The {key.get_name()} host key of {name} ({key.fingerprint}) is marked as revoked in "
            f"{revoked.where}. This could mean that a stolen key is being used to impersonate this host. "
            "ddptui refuses to connect, whatever other known_hosts lines or the flags say "
            "(--accept-new-host-keys too); ask the node's admin.", "hostkey-revoked")
    verdict = kh.verify(name, key)
    if verdict == "known":
        return None
    files = ", ".join(str(f) for f in target.known_hosts_files[:1])
    ca = kh.cert_authority(name) if verdict == "unknown" else None
    if ca is not None:
        t.close()
        port = f"-p {target.port} " if target.port != 22 else ""
        raise NodeError(
            node,
            f"{name} is covered by the @cert-authority line at {ca.where}: it proves its identity with a "
            "host certificate, and ddptui (paramiko) cannot check host certificates, so it refuses to "
            f"connect. To use this node, add its plain host key to {files or '~/.ssh/known_hosts'}: get it "
            f"with `ssh-keyscan -t {key.get_name()} {port}{target.hostname}`, check that its fingerprint "
            f"is {key.fingerprint} (`ssh-keygen -lf FILE`, and with the node's admin), then append the line "
            f"with the name {name}.", "hostkey-cert")
    if verdict == "changed":
        t.close()
        expected = kh.known_keys(name)[0]
        where = kh.where(name) or files
        default = os.path.expanduser("~/.ssh/known_hosts")
        remove = (f"ssh-keygen -R {name}" if not where or os.path.abspath(str(where).split(":")[0]) == default
                  else f"ssh-keygen -f {str(where).split(':')[0]} -R {name}")
        raise ChangedHostKey(
            node,
            "@@@ WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED! @@@ "
            f"The {key.get_name()} host key of {name} is now {key.fingerprint}, but known_hosts "
            f"({where}) says {expected.fingerprint}. Someone could be eavesdropping "
            "on you right now (man-in-the-middle), or the host was reinstalled. ddptui refuses to "
            f"connect; if the change is expected, remove the old key with `{remove}` and connect again.",
            "hostkey-changed", hostname=name, fingerprint=key.fingerprint,
            expected_fingerprint=expected.fingerprint, known_hosts=files)
    accept = settings.accept_new_host_keys or target.strict == "accept-new"
    if not accept and settings.confirm_host_key is not None:
        accept = bool(settings.confirm_host_key(node, name, key.get_name(), key.fingerprint))
    if not accept:
        t.close()
        raise UnknownHostKey(
            node,
            f"host key of {name} is not known ({key.get_name()} {key.fingerprint}); check the "
            "fingerprint with the node's admin, then accept it in the TUI or pass --accept-new-host-keys",
            "hostkey-unknown", hostname=name, key_type=key.get_name(), fingerprint=key.fingerprint,
            key_base64=key.get_base64(), known_hosts=files)
    saved = kh.add(name, key)
    return f"added {name} ({key.get_name()} {key.fingerprint}) to {saved}"


def authenticate(node: str, settings, target: Target, t: paramiko.Transport) -> list[str]:
    """Agent keys, then the identity files, as OpenSSH tries them; NodeError names every key tried."""
    tried: list[str] = []
    if not target.identities_only:
        try:
            agent_keys = paramiko.Agent().get_keys()
        except Exception:
            agent_keys = ()
        for k in agent_keys:
            tried.append(f"agent key {k.fingerprint}")
            if try_key(t, target.user, k):
                return tried
    paths = target.identities or ([] if target.identities_only else [os.path.expanduser(p) for p in DEFAULT_IDENTITIES])
    for path in paths:
        if not os.path.exists(path):
            if target.identities:
                tried.append(f"{path} (missing)")
            continue
        key = load_key(node, settings, path, tried)
        if key is None:
            continue
        tried.append(f"{path} ({key.fingerprint})")
        if try_key(t, target.user, key):
            return tried
    t.close()
    what = ", ".join(tried) if tried else "no keys at all (no agent, no IdentityFile, no ~/.ssh/id_*)"
    raise NodeError(node, f"authentication failed for {target.user}@{target.hostname}:{target.port}; "
                               f"tried {what}", "auth")


def load_key(node: str, settings, path: str, tried: list[str]) -> paramiko.PKey | None:
    try:
        return paramiko.PKey.from_path(path)
    except (paramiko.PasswordRequiredException, TypeError):
        # paramiko 5 raises cryptography's TypeError ("password-protected") for OpenSSH keys
        ask = settings.ask_passphrase
        phrase = ask(node, path) if ask else None
        if not phrase:
            tried.append(f"{path} (needs a passphrase)")
            return None
        try:
            return paramiko.PKey.from_path(path, password=phrase.encode())
        except (paramiko.SSHException, ValueError, TypeError):
            tried.append(f"{path} (wrong passphrase)")
            return None
    except (paramiko.SSHException, ValueError, OSError) as e:
        tried.append(f"{path} (unreadable: {e})")
        return None


def try_key(t: paramiko.Transport, user: str, key: paramiko.PKey) -> bool:
    try:
        t.auth_publickey(user, key)
    except paramiko.AuthenticationException:
        return False
    except paramiko.SSHException:
        return False
    return t.is_authenticated()
