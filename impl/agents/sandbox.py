"""The explorer's ``$(run)`` confined by the operating system: a bubblewrap sandbox.

The model's text is untrusted (an explored repository may tell it what to write), and no
parser knows every option of every program that can run another (git alone has dozens),
so a command runs where acting is impossible rather than where it was checked: the work
directory mounted read-only at its own path, ``/usr`` (the programs and their libraries)
read-only, a fresh ``/proc`` and a minimal ``/dev``, and nothing else (no ``/etc``,
``/home``, ``/tmp``, no other directory: a symlink that leaves the work directory leads
nowhere); new PID, network, IPC and UTS namespaces (no network); no capabilities, no new
privileges; a process and memory limit (``prlimit``). The pid namespace's first process
dies with bubblewrap, and the kernel then kills every process left in it: killing
bubblewrap kills the whole tree.

The kernel exempts root from the process limit, so when agentfsm runs as root the
command itself runs as ``nobody`` (bubblewrap mounts as root, ``setpriv`` drops to
``nobody`` inside, and a second, unprivileged bubblewrap gives it a user namespace that
allows no other): it reads what others may read, and the work directory must be readable
by others. Otherwise bubblewrap runs unprivileged in a new user namespace that allows no
other (``--disable-userns``: no namespace of its own with a writable tmpfs), where the
process limit counts only the sandbox's processes.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import os
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from agentfsm.impl.agents.tools import MAX_OUTPUT, ToolError, run_process

NOBODY = 65534
SEARCH_PATH = "/usr/bin:/bin"
# What the sandboxed programs see of an environment: nothing of agentfsm's (tokens, proxies), no
# system or user git configuration, no pager, no prompt, no index refresh written by git status.
# The explored repository's own configuration is read (it is untrusted, but whatever it runs is
# confined), hence safe.directory: the repository belongs to another user when the command runs as nobody.
ENVIRONMENT = {"PATH": SEARCH_PATH, "HOME": "/nonexistent", "LANG": "C.UTF-8", "PAGER": "cat", "GIT_PAGER": "cat",
               "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_TERMINAL_PROMPT": "0",
               "GIT_OPTIONAL_LOCKS": "0", "GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "safe.directory",
               "GIT_CONFIG_VALUE_0": "*"}
HOW_TO_ENABLE = ("install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap; make setup does it as root) and "
                 "allow user namespaces (sysctl user.max_user_namespaces > 0, kernel.unprivileged_userns_clone=1 "
                 "where it exists, kernel.apparmor_restrict_unprivileged_userns=0 or an AppArmor profile for bwrap "
                 "on Ubuntu 24.04 and later; in a container, one that permits them)")


@dataclass(frozen=True)
class Limits:
    """What one sandboxed command may use: processes (and threads) and address space per process."""

    processes: int = 64
    memory: int = 1 << 30


@dataclass(frozen=True)
class Confinement:
    """Whether ``$(run)`` can be confined here, and how (or why not)."""

    available: bool
    bwrap: str
    reason: str = ""

    def describe(self) -> str:
        if not self.available:
            return f"none: $(run) is refused ({self.reason}); to enable it, {HOW_TO_ENABLE}"
        who = "as nobody" if os.geteuid() == 0 else "in a user namespace"
        return (f"$(run) in a bubblewrap sandbox ({self.bwrap}, {who}): the work directory read-only, /usr "
                "read-only and nothing else, no network, no new privileges, process and memory limits; "
                "$(view) and $(text-search) read only inside the work directory")


def bwrap_argv(bwrap: str, workdir: Path, command: Sequence[str], limits: Limits,
               info_fd: int | None = None) -> list[str]:
    """The bubblewrap command line that runs ``command`` in ``workdir`` confined (see the module)."""
    root = os.geteuid() == 0
    argv = [bwrap, "--die-with-parent", "--new-session", "--clearenv", "--unshare-pid", "--unshare-net",
            "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
    if not root:
        argv += ["--unshare-user", "--disable-userns"]
    argv += ["--cap-drop", "ALL"]
    if root:
        argv += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]  # for setpriv, which drops them
    if info_fd is not None:
        argv += ["--info-fd", str(info_fd)]
    argv += ["--ro-bind", "/usr", "/usr"]
    for top in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):  # merged /usr: links; otherwise the directory
        path = Path("/") / top
        if path.is_symlink():
            argv += ["--symlink", os.readlink(path), str(path)]
        elif path.is_dir():
            argv += ["--ro-bind", str(path), str(path)]
    argv += ["--perms", "0755", "--dir", "/etc",
             "--ro-bind-try", "/etc/alternatives", "/etc/alternatives",  # Debian's program links (awk)
             "--proc", "/proc", "--dev", "/dev", "--remount-ro", "/dev"]
    for parent in reversed(workdir.parents[:-1]):  # traversable by nobody, whatever the host's modes
        argv += ["--perms", "0755", "--dir", str(parent)]
    if root:
        argv += ["--perms", "0755", "--dir", "/tmp"]  # where the inner bubblewrap mounts its own root
    argv += ["--ro-bind", str(workdir), str(workdir), "--remount-ro", "/", "--chdir", str(workdir)]
    for name, value in ENVIRONMENT.items():
        argv += ["--setenv", name, value]
    argv.append("--")
    if root:  # as nobody, in a user namespace of its own that allows no other (a tmpfs of its own, say)
        argv += ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--inh-caps=-all",
                 "bwrap", "--unshare-user", "--disable-userns", "--die-with-parent", "--dev-bind", "/", "/",
                 "--chdir", str(workdir), "--"]
    argv += ["prlimit", f"--nproc={limits.processes}", f"--as={limits.memory}", "--core=0", "--", *command]
    return argv


@functools.cache
def probe(bwrap: str | None = None) -> Confinement:
    """Whether a sandbox starts here: run ``true`` in one, over an empty work directory (once per
    process and bubblewrap path)."""
    found = bwrap or shutil.which("bwrap")
    if found is None:
        return Confinement(False, "bwrap", "bubblewrap (bwrap) is not installed")
    with tempfile.TemporaryDirectory() as empty:
        os.chmod(empty, 0o755)
        try:
            done = subprocess.run(bwrap_argv(found, Path(empty).resolve(), ["true"], Limits()), capture_output=True,
                                  stdin=subprocess.DEVNULL, timeout=30)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return Confinement(False, found, f"{found} could not run: {exc}")
    if done.returncode != 0:
        said = (done.stderr or done.stdout).decode("utf-8", "replace").strip().splitlines()
        return Confinement(False, found, f"{found} failed: {said[-1] if said else f'exit status {done.returncode}'}")
    return Confinement(True, found)


@dataclass
class Sandbox:
    """Runs commands confined in one work directory; refuses when it cannot confine them."""

    workdir: Path
    limits: Limits = field(default_factory=Limits)
    bwrap: str | None = None  # None: the one on PATH

    async def run(self, command: Sequence[str], timeout: float) -> tuple[int, str]:
        """(status, output) of ``command``; ``TimeoutError`` once the whole tree is killed; ``ToolError``
        when the sandbox is unavailable here. An output past ``MAX_OUTPUT`` bytes stops the command."""
        confinement = await asyncio.to_thread(probe, self.bwrap)
        if not confinement.available:
            raise ToolError(f"run is refused: it runs only in a sandbox, and none is available here "
                            f"({confinement.reason}); to enable it, {HOW_TO_ENABLE}")
        workdir = self.workdir.resolve()
        if os.geteuid() == 0 and workdir.stat().st_mode & (stat.S_IROTH | stat.S_IXOTH) != stat.S_IROTH | stat.S_IXOTH:
            raise ToolError(f"run is refused: as root, commands run as nobody in the sandbox, and the work "
                            f"directory {workdir} is not readable by others (chmod o+rx {workdir})")
        info_read, info_write = os.pipe()
        try:
            argv = bwrap_argv(confinement.bwrap, workdir, command, self.limits, info_write)
            try:
                # bubblewrap itself gets no more of agentfsm's environment than the command: the
                # sandbox's first process keeps the environment it started with, in /proc/1/environ.
                return await run_process(argv, workdir, timeout, ENVIRONMENT, pass_fds=(info_write,),
                                         stop_over=MAX_OUTPUT)
            finally:
                await _sandbox_gone(info_read)
        finally:
            os.close(info_read)
            with contextlib.suppress(OSError):
                os.close(info_write)


async def _sandbox_gone(info: int) -> None:
    """Wait until the sandbox's first process (whose end kills the namespace) has exited: bubblewrap
    wrote its pid to ``info`` when it started it."""
    os.set_blocking(info, False)
    data = b""
    with contextlib.suppress(BlockingIOError):
        while chunk := os.read(info, 4096):
            data += chunk
    try:
        pid = int(json.loads(data)["child-pid"])
        pidfd = os.pidfd_open(pid)
    except (ValueError, KeyError, TypeError, OSError):
        return  # it never started, or is already gone
    loop = asyncio.get_running_loop()
    gone: asyncio.Future[None] = loop.create_future()

    def exited() -> None:
        if not gone.done():
            gone.set_result(None)
    loop.add_reader(pidfd, exited)
    try:
        async with asyncio.timeout(10):
            await asyncio.shield(gone)
    except TimeoutError:
        pass  # killed and unkillable (uninterruptible sleep): nothing more can be done
    finally:
        loop.remove_reader(pidfd)
        os.close(pidfd)
